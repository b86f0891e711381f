"""`apportion agent`'s refusals: each names what is wrong, exits 2, and never echoes a token."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from apportion.agent.launch import lock_workdir
from apportion.cli.main import app


def agent(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["agent", "--master", "http://127.0.0.1:9", "--name", "h1", *args],
                           env={"APPORTION_TOKEN": "", **(env or {})})
    return r.exit_code, r.output


def test_no_token() -> None:
    code, out = agent()
    assert code == 2 and "APPORTION_TOKEN" in out


def test_empty_token_file(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("\n")
    code, out = agent("--token-file", str(tmp_path / "t"))
    assert code == 2 and "empty" in out


@pytest.mark.parametrize("pair", ["novalue", "bad-key=1"])
def test_bad_attribute(pair: str) -> None:
    code, out = agent("--attribute", pair, env={"APPORTION_TOKEN": "s3cr3t"})
    assert code == 2 and "--attribute" in out and "s3cr3t" not in out


def test_workdir_in_use(tmp_path: Path) -> None:
    held = lock_workdir(tmp_path)
    try:
        code, out = agent("--workdir", str(tmp_path), env={"APPORTION_TOKEN": "s3cr3t"})
    finally:
        held.close()
    assert code == 2 and "in use by another agent" in out and "s3cr3t" not in out


@pytest.mark.parametrize(("args", "says"), [
    (["--default-user", "root"], "root is one of --banned-users"),
    (["--default-user", "alice", "--banned-users", "root,alice"], "alice is one of --banned-users"),
    (["--default-user", "a,b"], "one user name"),
    (["--default-user", ""], "one user name"),
    (["--banned-users", "root,bad name"], "--banned-users: 'bad name' is not a user name"),
    (["--allowed-system-users", "no/body"], "--allowed-system-users: 'no/body' is not a user name"),
    (["--min-uid", "-1"], "--min-uid"),
])
def test_bad_user_policy(args: list[str], says: str) -> None:
    code, out = agent(*args, env={"APPORTION_TOKEN": "s3cr3t"})
    assert code == 2 and says in " ".join(out.split()).replace("│", "").replace("  ", " "), out


def test_bad_containment(tmp_path: Path) -> None:
    code, out = agent("--containment", "cgroups", "--workdir", str(tmp_path), env={"APPORTION_TOKEN": "s3cr3t"})
    assert code == 2 and "--containment" in out and "cgroup-v1" in out


def test_a_named_containment_that_cannot_work_stops_the_agent(tmp_path: Path) -> None:
    from apportion.agent.containment import ContainmentUnavailable, choose

    try:
        choose("cgroup-v2", tmp_path / "probe").close()
    except ContainmentUnavailable as e:
        why = str(e)
    else:
        pytest.skip("cgroup v2 works here")
    code, out = agent("--containment", "cgroup-v2", "--workdir", str(tmp_path / "w"), env={"APPORTION_TOKEN": "s3cr3t"})
    assert code == 2 and why in out and "s3cr3t" not in out
