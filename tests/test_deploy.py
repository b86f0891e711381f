"""deploy/apportion-agent.service stays true to the agent: delegation on, run as root with the user
policy, and every flag in its ExecStart one `apportion agent` takes (with a value it accepts)."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

import typer

from apportion.agent.users import UserPolicy, parse_names
from apportion.cli.main import app

UNIT = Path(__file__).resolve().parents[1] / "deploy" / "apportion-agent.service"


def _unit() -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # keys are case-sensitive
    cp.read_string(UNIT.read_text())
    return cp


def test_delegation_and_root() -> None:
    s = _unit()["Service"]
    assert s["Delegate"] == "yes" and s["User"] == "root"
    assert s["KillMode"] == "process"  # a restart leaves the activities running, to be adopted
    assert s["StateDirectoryMode"] == "0711"
    assert "Environment" not in s  # the token is read from a file, never from the environment


def test_execstart_flags_are_the_agents() -> None:
    argv = shlex.split(_unit()["Service"]["ExecStart"].replace("\\\n", " "))
    assert argv[1] == "agent"
    agent = typer.main.get_command(app).commands["agent"]  # type: ignore[attr-defined]
    # parsed as `apportion agent` parses them: an unknown flag or a value it does not take raises
    given = agent.make_context("agent", argv[2:]).params
    assert given["master"].startswith("https://") and given["name"] == "%H"
    assert str(given["token_file"]) == "/etc/apportion/agent.token" and given["containment"] == "auto"
    # the user policy is written out, and is the default one
    policy = UserPolicy(default_user=given["default_user"], min_uid=given["min_uid"],
                        banned_users=parse_names(given["banned_users"], "--banned-users"),
                        allowed_system_users=parse_names(given["allowed_system_users"], "--allowed-system-users"))
    assert policy == UserPolicy()
