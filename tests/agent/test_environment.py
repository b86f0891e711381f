"""An activity's clean environment: nothing of the agent's own leaks into it."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apportion.agent.environment import DEFAULT_LANG, SAFE_PATH, clean_env
from apportion.agent.users import RunAs, agent_identity

ALICE = RunAs(name="alice", uid=1234, gid=1234, groups=(1234,), home="/home/alice")
APPORTION = {"APPORTION_HOST": "h1", "APPORTION_ACTIVITY": "7", "APPORTION_SLOTS": "2",
             "APPORTION_ALLOCATION": "3", "APPORTION_MASTER": "http://m:8080"}


def test_only_declared_apportion_and_the_basics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPORTION_TOKEN", "secret-of-the-agent")
    monkeypatch.setenv("VIRTUAL_ENV", "/opt/agent-venv")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    env = clean_env({"MINE": "x"}, APPORTION, ALICE)
    assert env == {**APPORTION, "MINE": "x", "PATH": SAFE_PATH, "LANG": DEFAULT_LANG, "HOME": "/home/alice",
                   "USER": "alice", "LOGNAME": "alice"}


def test_declared_path_and_lang_win_but_not_the_user() -> None:
    env = clean_env({"PATH": "/opt/x/bin", "LANG": "fr_FR.UTF-8", "HOME": "/root", "USER": "root",
                     "LOGNAME": "root"}, {}, ALICE)
    assert (env["PATH"], env["LANG"]) == ("/opt/x/bin", "fr_FR.UTF-8")
    assert (env["HOME"], env["USER"], env["LOGNAME"]) == ("/home/alice", "alice", "alice")


def test_apportion_variables_win_over_declared_and_others_are_dropped() -> None:
    env = clean_env({"APPORTION_HOST": "spoofed", "APPORTION_TOKEN": "the-job's-own"},
                    {"APPORTION_HOST": "h1", "NOT_MINE": "agent's"}, ALICE)
    assert env["APPORTION_HOST"] == "h1"
    assert env["APPORTION_TOKEN"] == "the-job's-own"  # a token the master gave this activity (DUCC) stays
    assert "NOT_MINE" not in env


_NAME = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=12)


@given(declared=st.dictionaries(_NAME, st.text(max_size=10), max_size=6),
       apportion=st.dictionaries(_NAME.map(lambda s: "APPORTION_" + s), st.text(max_size=10), max_size=4))
def test_nothing_but_what_was_given(declared: dict[str, str], apportion: dict[str, str]) -> None:
    env = clean_env(declared, apportion, ALICE)
    assert set(env) == set(declared) | set(apportion) | {"PATH", "LANG", "HOME", "USER", "LOGNAME"}
    for k, v in apportion.items():
        assert env[k] == v
    for k, v in declared.items():
        if k not in apportion and k not in ("HOME", "USER", "LOGNAME"):
            assert env[k] == v


def test_a_real_process_sees_exactly_that(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPORTION_TOKEN", "secret-of-the-agent")
    env = clean_env({"MINE": "x"}, APPORTION, agent_identity())
    out = subprocess.run(["/usr/bin/env"], env=env, capture_output=True, text=True, check=True, cwd="/")
    seen = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert seen == env
    assert "secret-of-the-agent" not in out.stdout
    assert os.environ["APPORTION_TOKEN"] == "secret-of-the-agent"
