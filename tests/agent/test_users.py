"""The agent's user policy, with real users from the passwd database and, as root, a real OS user
made for the test and removed after it."""

from __future__ import annotations

import os
import pwd
import secrets
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from apportion.agent import users
from apportion.agent.users import Refused, RunAs, UserPolicy, agent_identity, popen_kwargs, prepare_dir, resolve

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="switching users needs an agent running as root")
needs_non_root = pytest.mark.skipif(ROOT, reason="the non-root rules apply only to an agent not running as root")
POLICY = UserPolicy()


def _system_user() -> str:
    """A user with 0 < uid < 1000 that is not allowed by default (daemon on most systems)."""
    for e in pwd.getpwall():
        if 0 < e.pw_uid < 1000 and e.pw_name not in POLICY.allowed_system_users | POLICY.banned_users:
            return e.pw_name
    pytest.skip("no system user (0 < uid < 1000) in the passwd database")


@pytest.fixture
def os_user() -> Iterator[pwd.struct_passwd]:
    """A real OS user with a uid >= 1000 and a home, removed with its home after the test."""
    if not ROOT:
        pytest.skip("making an OS user needs root")
    name = f"aptest{secrets.token_hex(3)}"
    made = subprocess.run(["useradd", "--create-home", "--key", "UID_MIN=1000", "--shell", "/usr/sbin/nologin",
                           name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        with pytest.raises(KeyError):
            pwd.getpwnam(name)


def test_policy_defaults() -> None:
    assert POLICY == UserPolicy(default_user="nobody", min_uid=1000, banned_users=frozenset({"root"}),
                                allowed_system_users=frozenset({"nobody"}))


def test_refused_names_user_host_and_rule() -> None:
    e = Refused("daemon", "host1", "uid below --min-uid 1000", uid=1)
    assert str(e) == "user daemon (uid 1) refused on host1: uid below --min-uid 1000"
    assert (e.user, e.host, e.uid) == ("daemon", "host1", 1)
    assert str(Refused("ghost", "h", "no such user")) == "user ghost refused on h: no such user"


def test_agent_identity_is_the_effective_user() -> None:
    me = agent_identity()
    assert me.uid == os.geteuid()
    assert me.name == pwd.getpwuid(os.geteuid()).pw_name
    assert me.gid in me.groups or me.groups  # getgrouplist includes the primary group


@needs_root
def test_root_agent_defaults_to_nobody() -> None:
    run_as = resolve(None, POLICY, "host1")
    nobody = pwd.getpwnam("nobody")
    assert (run_as.name, run_as.uid, run_as.gid, run_as.home) == ("nobody", nobody.pw_uid, nobody.pw_gid,
                                                                   nobody.pw_dir)
    assert nobody.pw_gid in run_as.groups


@needs_root
def test_root_is_banned() -> None:
    with pytest.raises(Refused) as e:
        resolve("root", POLICY, "host1")
    assert str(e.value) == "user root refused on host1: banned user (--banned-users)"


@needs_root
def test_uid_0_is_refused_even_when_not_banned_and_allowed() -> None:
    policy = UserPolicy(banned_users=frozenset(), allowed_system_users=frozenset({"root", "nobody"}), min_uid=0)
    with pytest.raises(Refused) as e:
        resolve("root", policy, "h2")
    assert str(e.value) == "user root (uid 0) refused on h2: uid 0 never runs work"


@needs_root
def test_default_user_is_checked_too() -> None:
    with pytest.raises(Refused) as e:
        resolve(None, UserPolicy(default_user="root"), "h")
    assert "banned user" in str(e.value)


@needs_root
def test_system_user_below_min_uid() -> None:
    name = _system_user()
    uid = pwd.getpwnam(name).pw_uid
    with pytest.raises(Refused) as e:
        resolve(name, POLICY, "host1")
    assert str(e.value) == (f"user {name} (uid {uid}) refused on host1: uid below --min-uid 1000 "
                            "(not in --allowed-system-users)")
    allowed = UserPolicy(allowed_system_users=frozenset({"nobody", name}))
    assert resolve(name, allowed, "host1").uid == uid


@needs_root
def test_banned_wins_over_allowed(os_user: pwd.struct_passwd) -> None:
    policy = UserPolicy(banned_users=frozenset({"root", os_user.pw_name}),
                        allowed_system_users=frozenset({os_user.pw_name}))
    with pytest.raises(Refused, match="banned user"):
        resolve(os_user.pw_name, policy, "h")


@needs_root
@pytest.mark.parametrize("name", ["ghost-no-such-user-xyz", "bad\x00name", ""])
def test_unknown_user(name: str) -> None:
    with pytest.raises(Refused) as e:
        resolve(name, POLICY, "host1")
    assert str(e.value) == f"user {name} refused on host1: no such user"


@needs_root
def test_real_user_at_or_above_min_uid(os_user: pwd.struct_passwd) -> None:
    assert os_user.pw_uid >= 1000
    run_as = resolve(os_user.pw_name, POLICY, "h")
    assert (run_as.name, run_as.uid, run_as.gid, run_as.home) == (os_user.pw_name, os_user.pw_uid,
                                                                   os_user.pw_gid, os_user.pw_dir)
    with pytest.raises(Refused, match="uid below --min-uid"):
        resolve(os_user.pw_name, UserPolicy(min_uid=os_user.pw_uid + 1), "h")


@needs_root
def test_popen_runs_as_the_user_with_exactly_its_groups(os_user: pwd.struct_passwd, tmp_path: Path) -> None:
    run_as = resolve(os_user.pw_name, POLICY, "h")
    kw = popen_kwargs(run_as)
    assert kw == {"user": os_user.pw_uid, "group": os_user.pw_gid, "extra_groups": list(run_as.groups)}
    # /bin/sh is runnable by anyone, wherever this test's interpreter lives
    out = subprocess.run(["/bin/sh", "-c", "id -u; id -g; id -G"], capture_output=True, text=True, check=True,
                         cwd="/", **kw)
    uid, gid, groups = out.stdout.split("\n")[:3]
    assert (int(uid), int(gid)) == (os_user.pw_uid, os_user.pw_gid)
    assert {int(g) for g in groups.split()} == set(run_as.groups)
    assert 0 not in {int(g) for g in groups.split()}  # root's groups are dropped


@needs_root
def test_prepare_dir_belongs_to_the_user(os_user: pwd.struct_passwd, tmp_path: Path) -> None:
    run_as = resolve(os_user.pw_name, POLICY, "h")
    adir = tmp_path / "activities" / "7"
    adir.parent.mkdir()
    prepare_dir(adir, run_as)
    st = adir.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (os_user.pw_uid, os_user.pw_gid, 0o700)
    for stream in ("stdout", "stderr"):
        s = (adir / stream).stat()
        assert (s.st_uid, s.st_gid, stat.S_IMODE(s.st_mode)) == (os_user.pw_uid, os_user.pw_gid, 0o600)
    # the user can write there, through the directory it owns
    subprocess.run(["/bin/sh", "-c", "echo hi > mine; echo out >> stdout"], cwd=adir, check=True,
                   **popen_kwargs(run_as))
    assert (adir / "mine").stat().st_uid == os_user.pw_uid
    assert (adir / "stdout").read_text() == "out\n"


def test_prepare_dir_as_the_agent_itself(tmp_path: Path) -> None:
    me = agent_identity()
    prepare_dir(tmp_path / "a", me)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    assert (tmp_path / "a" / "stdout").stat().st_uid == os.geteuid()
    assert popen_kwargs(me) == {}


def test_output_is_never_opened_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "only-the-agent-may-write"
    target.write_text("secret\n")
    adir = tmp_path / "a"
    adir.mkdir()
    (adir / "stdout").symlink_to(target)
    with pytest.raises(OSError):
        users.open_output(adir / "stdout")
    with pytest.raises(OSError):
        users.open_for_reading(adir / "stdout")
    with pytest.raises(OSError):
        prepare_dir(adir, agent_identity())
    assert target.read_text() == "secret\n"
    os.mkfifo(adir / "stderr")
    with pytest.raises(OSError, match="not a regular file"):
        users.open_for_reading(adir / "stderr")
    (adir / "stdout").unlink()
    with users.open_output(adir / "stdout") as f:
        f.write(b"line\n")
    with users.open_for_reading(adir / "stdout") as f:
        assert f.read() == b"line\n"


@needs_non_root
def test_non_root_agent_runs_only_as_itself() -> None:
    me = agent_identity()
    assert resolve(None, POLICY, "h") == me
    assert resolve(me.name, POLICY, "h") == me
    with pytest.raises(Refused) as e:
        resolve("alice-not-me", POLICY, "h")
    assert str(e.value) == (f"user alice-not-me refused on h: the agent runs as {me.name} without root: "
                            "cannot run as alice-not-me")


@needs_root
def test_non_root_agent_rules_as_a_real_non_root_process(os_user: pwd.struct_passwd) -> None:
    """The same rules, checked in a process that really runs as a non-root user."""
    code = ("from apportion.agent.users import *\nme = agent_identity()\n"
            "assert resolve(None, UserPolicy(), 'h') == me\nassert popen_kwargs(me) == {}\n"
            "try:\n    resolve('root', UserPolicy(), 'h')\nexcept Refused as e:\n    print(e)\n")
    src = Path(users.__file__).resolve().parents[2]
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/",
                         env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, **popen_kwargs(
                             RunAs(os_user.pw_name, os_user.pw_uid, os_user.pw_gid, (os_user.pw_gid,), "/")))
    if out.returncode != 0 and "Permission denied" in out.stderr:
        pytest.skip(f"the test user cannot read the source tree {src}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (f"user root refused on h: the agent runs as {os_user.pw_name} without root: "
                                  "cannot run as root")
