"""Names and work directories of the agents one process runs, and the work directory's lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from apportion.agent.launch import AgentConfig, WorkdirBusy, lock_workdir


def test_names_and_workdirs(tmp_path: Path) -> None:
    one = AgentConfig(masters=["http://m"], name="h", token="s3cr3t", workdir=tmp_path)
    assert one.names() == ["h"] and one.workdir_of("h") == tmp_path
    many = AgentConfig(masters=["http://m"], name="h", token="t", workdir=tmp_path, count=3)
    assert many.names() == ["h-0", "h-1", "h-2"]
    assert many.workdir_of("h-1") == tmp_path / "h-1"
    assert AgentConfig(masters=["http://m"], name="h", token="t").workdir_of("h") == Path("apportion-agent/h")
    assert "s3cr3t" not in repr(one)  # the token stays out of reprs (and so of logs)


def test_one_agent_per_workdir(tmp_path: Path) -> None:
    held = lock_workdir(tmp_path / "w")
    try:
        with pytest.raises(WorkdirBusy, match="in use"):
            lock_workdir(tmp_path / "w")
    finally:
        held.close()
    lock_workdir(tmp_path / "w").close()  # free again once the first lets go


def test_workdir_lets_execution_users_through_only(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir(mode=0o777)
    lock_workdir(tmp_path / "w").close()
    # execution users pass through to their own activity directory (0700, theirs); they list nothing
    # and write nothing in the agent's directories
    assert (tmp_path / "w").stat().st_mode & 0o777 == 0o711
    assert (tmp_path / "w" / "activities").stat().st_mode & 0o777 == 0o711


def test_default_user_policy() -> None:
    policy = AgentConfig(masters=["http://m"], name="h", token="t").policy
    assert (policy.default_user, policy.min_uid, policy.banned_users, policy.allowed_system_users) == (
        "nobody", 1000, frozenset({"root"}), frozenset({"nobody"}))
