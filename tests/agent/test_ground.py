"""The agent checks its ground at start: a work directory its execution users cannot reach stops
it, naming the directory that bars the way; its lock file is its own (0600)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from apportion.agent import ground
from apportion.agent.launch import lock_workdir
from apportion.agent.users import UserPolicy, dynamic_identity
from tests.service.live import CLI

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="execution users other than the agent exist only for a root agent")


@pytest.fixture
def open_base() -> Path:
    """A directory execution users may pass through (0711), as /var/lib is."""
    base = Path(tempfile.mkdtemp(prefix="aptest-ground-"))
    base.chmod(0o711)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _agent(workdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # a master nobody answers at: an agent that passed its checks would retry for ever (the timeout)
    return subprocess.run([*CLI, "agent", "--master", "http://127.0.0.1:9", "--name", "h1", "--workdir", str(workdir),
                           "--containment", "process-group", *extra], env={**os.environ, "APPORTION_TOKEN": "s3cr3t"},
                          capture_output=True, text=True, timeout=60)


@needs_root
def test_an_unreachable_workdir_stops_the_agent_naming_the_directory(open_base: Path) -> None:
    closed = open_base / "private"
    closed.mkdir(mode=0o700)
    workdir = closed / "agent"
    r = _agent(workdir)
    out = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stderr
    assert f"execution users cannot reach the work directory: {closed} (mode 0700, uid 0)" in out, out
    assert f"through to {workdir / 'activities'}" in out and f"chmod o+x {closed}" in out, out
    assert "s3cr3t" not in r.stdout + r.stderr
    # with --dynamic-users off it is the --default-user that is checked, and barred the same
    r = _agent(workdir, "--dynamic-users", "off")
    assert r.returncode == 2 and "does not let nobody" in " ".join(r.stderr.split()), r.stderr


@needs_root
def test_the_check_follows_the_real_path(open_base: Path, tmp_path: Path) -> None:
    # a link in a private directory to a reachable one: the processes find their files by the real path
    (open_base / "real").mkdir(mode=0o711)
    (tmp_path / "link").symlink_to(open_base / "real")
    lock_workdir(tmp_path / "link").close()
    assert ground.unreachable(tmp_path / "link" / "activities", dynamic_identity(61184)) is None
    ground.check(tmp_path / "link" / "activities", UserPolicy())  # raises nothing
    why = ground.unreachable(tmp_path / "activities-here", dynamic_identity(61184))
    bar = next(d for d in [*reversed(tmp_path.parents), tmp_path] if not d.stat().st_mode & stat.S_IXOTH)
    assert why is not None and why.startswith(f"execution users cannot reach the work directory: {bar} "), why


@needs_root
def test_an_acl_or_group_that_lets_the_user_through_counts(open_base: Path) -> None:
    """The check is a real entry as the user: a directory whose group is the user's own lets it pass."""
    uid = 61184
    d = open_base / "group-only"
    d.mkdir(mode=0o710)
    os.chown(d, 0, uid)
    assert ground.unreachable(d, dynamic_identity(uid)) is None
    assert ground.unreachable(d, dynamic_identity(uid + 1)) is not None


def test_the_lock_file_is_the_agents_alone(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "agent.lock").write_text("")
    (tmp_path / "w" / "agent.lock").chmod(0o644)  # left by an older agent
    lock_workdir(tmp_path / "w").close()
    assert stat.S_IMODE((tmp_path / "w" / "agent.lock").stat().st_mode) == 0o600
    lock_workdir(tmp_path / "fresh").close()
    assert stat.S_IMODE((tmp_path / "fresh" / "agent.lock").stat().st_mode) == 0o600


def test_a_link_as_lock_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "target").write_text("keep")
    (tmp_path / "w" / "agent.lock").symlink_to(tmp_path / "target")
    with pytest.raises(ground.GroundProblem, match="cannot open .*agent.lock"):
        lock_workdir(tmp_path / "w")
    assert (tmp_path / "target").read_text() == "keep"
