"""Distinct default identities: consumers that name no execution user each run under a uid of their
own (--dynamic-users), with real processes as real uids, and the assignment kept across restarts."""

from __future__ import annotations

import grp
import json
import os
import pwd
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from apportion.agent import dynamic
from apportion.agent.dynamic import DynamicUsers, parse_range
from apportion.agent.protocol import Start
from apportion.agent.runner import ProcessRunner
from apportion.agent.users import UserPolicy
from tests.service.live import wait_until

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="switching to a dynamic uid needs an agent running as root")
PY = sys.executable
LO, HI = dynamic.DEFAULT_RANGE


def _free(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return False
        except KeyError:
            pass
    return True


@pytest.mark.parametrize(("text", "want"), [("61184-65519", (61184, 65519)), (" 70000-70000 ", (70000, 70000)),
                                             ("off", None), ("OFF", None)])
def test_parse_range(text: str, want: tuple[int, int] | None) -> None:
    assert parse_range(text) == want


@pytest.mark.parametrize("text", ["", "61184", "a-b", "5-4", "0-10", "1-4294967295", "-5-10"])
def test_parse_range_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_range(text)


def test_a_consumer_keeps_its_uid_and_two_consumers_never_share_one(tmp_path: Path) -> None:
    users = DynamicUsers(tmp_path, LO, HI)
    paths = [f"/Apps/team{i}" for i in range(300)]
    uids = {p: users.uid_for(p) for p in paths}
    assert len(set(uids.values())) == len(paths)  # never one uid for two consumers
    assert all(LO <= u <= HI and _free(u) for u in uids.values())
    assert users.uid_for("/Apps/team7") == uids["/Apps/team7"]
    # kept: the agent restarted finds every consumer's uid again, in a file only it reads
    again = DynamicUsers(tmp_path, LO, HI)
    assert {p: again.uid_for(p) for p in paths} == uids
    assert stat.S_IMODE((tmp_path / dynamic.FILE).stat().st_mode) == 0o600
    # the first pick is a hash of the path: another host (another state directory) picks the same
    # uid for a consumer that met no collision
    (tmp_path / "other").mkdir()
    elsewhere = DynamicUsers(tmp_path / "other", LO, HI)
    lone = "/Apps/team0"
    if uids[lone] == users.first_pick(lone):
        assert elsewhere.uid_for(lone) == uids[lone]


def test_collisions_take_the_next_free_uid_and_a_full_range_gives_none(tmp_path: Path) -> None:
    lo = next(u for u in range(200000, 300000) if _free(u) and _free(u + 1))
    users = DynamicUsers(tmp_path, lo, lo + 1)
    a, b = users.uid_for("/A"), users.uid_for("/B")
    assert {a, b} == {lo, lo + 1}  # whatever their hashes, they are told apart
    assert users.uid_for("/C") is None
    assert users.uid_for("/A") == a
    # a range changed by the operator keeps what still lies in it
    narrower = DynamicUsers(tmp_path, a, a)
    assert narrower.uid_for("/A") == a and narrower.uid_for("/B") is None


def test_uids_the_host_names_are_skipped(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody").pw_uid
    users = DynamicUsers(tmp_path, nobody, nobody)
    assert users.uid_for("/A") is None  # nobody's uid is in the passwd database: never given


def test_an_unreadable_file_is_set_aside(tmp_path: Path) -> None:
    (tmp_path / dynamic.FILE).write_text("{not json")
    users = DynamicUsers(tmp_path, LO, HI)
    assert users.assigned == {} and (tmp_path / "dynamic-users.bad").exists()
    # a file that gives one uid to two consumers keeps it for one only
    (tmp_path / dynamic.FILE).write_text(json.dumps({"range": [LO, HI], "users": {"/A": LO + 1, "/B": LO + 1}}))
    assert DynamicUsers(tmp_path, LO, HI).assigned == {"/A": LO + 1}


@needs_root
def test_a_uid_that_runs_a_process_is_skipped(tmp_path: Path) -> None:
    uid = next(u for u in range(300000, 400000) if _free(u) and _free(u + 1))
    squatter = subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[], cwd="/")
    try:
        wait_until(lambda: os.stat(f"/proc/{squatter.pid}").st_uid == uid, 10, "the squatter runs as its uid")
        assert DynamicUsers(tmp_path, uid, uid).uid_for("/A") is None
        (tmp_path / "x").mkdir()
        assert DynamicUsers(tmp_path / "x", uid, uid + 1).uid_for("/A") == uid + 1
    finally:
        squatter.kill()
        squatter.wait()


# -- real processes as their consumers' uids ----------------------------------------------------------
WRITES_AND_WAITS = """
import os, sys, time
with open('mine', 'w') as f:
    f.write('secret of ' + sys.argv[1])
os.chmod('mine', 0o644)   # even readable by all: the directory above is 0700 and its user's
print('ready', os.getuid(), os.getgid(), os.getgroups(), os.environ['HOME'], os.environ['USER'], flush=True)
time.sleep(60)
"""
PRIES = """
import os, signal, sys
victim_pid = int(sys.argv[1])
for what, act in (('read', lambda: open('../1/mine').read()), ('list', lambda: os.listdir('../1')),
                  ('signal', lambda: os.kill(victim_pid, signal.SIGKILL))):
    try:
        act()
        print(what, 'DONE', flush=True)
    except PermissionError:
        print(what, 'refused', flush=True)
print('uid', os.getuid(), flush=True)
"""


def _report(r: ProcessRunner, activity: int) -> dict:
    r.poll()
    return next(x for x in r.reports({})[0] if x["id"] == activity)


def _ready(r: ProcessRunner, activity: int) -> dict:
    return wait_until(lambda: (x := _report(r, activity)).get("stdout") and x["stdout"][0].startswith("ready") and x,
                      20, f"activity {activity} ready")


def _ended(r: ProcessRunner, activity: int) -> dict:
    return wait_until(lambda: (x := _report(r, activity))["state"] != "running" and x, 20, f"activity {activity} ends")


@needs_root
def test_two_consumers_run_as_two_uids_and_cannot_touch_each_other(tmp_path: Path) -> None:
    work = tmp_path / "work"
    runner = ProcessRunner(work, containment="process-group")
    try:
        runner.start(Start(activity=1, argv=[PY, "-c", WRITES_AND_WAITS, "A"], allocation=1, consumer="/Apps/a"), "h1")
        a = _ready(runner, 1)
        uid_a = a["uid"]
        assert LO <= uid_a <= HI and a["user"] == f"dynamic-{uid_a}"
        assert os.stat(f"/proc/{a['pid']}").st_uid == uid_a
        adir = runner.activity_dir(1)
        # its own uid and gid, no other group; HOME and USER are its own; its directory is its own
        assert a["stdout"][0] == f"ready {uid_a} {uid_a} [{uid_a}] {adir} dynamic-{uid_a}"
        assert (adir.stat().st_uid, stat.S_IMODE(adir.stat().st_mode)) == (uid_a, 0o700)

        runner.start(Start(activity=2, argv=[PY, "-c", PRIES, str(a["pid"])], allocation=2, consumer="/Apps/b"), "h1")
        b = _ended(runner, 2)
        uid_b = b["uid"]
        assert LO <= uid_b <= HI and uid_b != uid_a
        assert b["stdout"] == ["read refused", "list refused", "signal refused", f"uid {uid_b}"], b
        assert _report(runner, 1)["state"] == "running"  # untouched

        # the same consumer again: the same uid; an explicit user still runs as that user
        runner.start(Start(activity=3, argv=[PY, "-c", "import os; print(os.getuid())"], allocation=3,
                           consumer="/Apps/a"), "h1")
        assert _ended(runner, 3)["stdout"] == [str(uid_a)]
        nobody = pwd.getpwnam("nobody").pw_uid
        runner.start(Start(activity=4, argv=[PY, "-c", "import os; print(os.getuid())"], allocation=4,
                           consumer="/Apps/b", user="nobody"), "h1")
        four = _ended(runner, 4)
        assert (four["user"], four["stdout"]) == ("nobody", [str(nobody)])
        # no consumer named (an older master): the --default-user, as before
        runner.start(Start(activity=5, argv=[PY, "-c", "import os; print(os.getuid())"], allocation=5), "h1")
        assert _ended(runner, 5)["stdout"] == [str(nobody)]
        runner.stop(1, kill_grace=5)
        _ended(runner, 1)
    finally:
        runner.close(kill=True)
    # the agent restarted: the consumers keep their uids
    again = ProcessRunner(work, containment="process-group")
    try:
        again.start(Start(activity=6, argv=[PY, "-c", "import os; print(os.getuid())"], allocation=6,
                          consumer="/Apps/b"), "h1")
        assert _ended(again, 6)["stdout"] == [str(uid_b)]
    finally:
        again.close(kill=True)


@needs_root
def test_dynamic_users_off_shares_the_default_user(tmp_path: Path) -> None:
    runner = ProcessRunner(tmp_path / "work", containment="process-group", policy=UserPolicy(dynamic=None))
    try:
        for i, consumer in ((1, "/A"), (2, "/B")):
            runner.start(Start(activity=i, argv=[PY, "-c", "import os; print(os.getuid())"], allocation=i,
                               consumer=consumer), "h1")
        assert {_ended(runner, 1)["user"], _ended(runner, 2)["user"]} == {"nobody"}
        assert not (tmp_path / "work" / dynamic.FILE).exists()
    finally:
        runner.close(kill=True)


@needs_root
def test_a_full_range_refuses_the_start_naming_the_consumer(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody").pw_uid
    runner = ProcessRunner(tmp_path / "work", containment="process-group",
                           policy=UserPolicy(dynamic=(nobody, nobody)))
    try:
        runner.start(Start(activity=1, argv=["/bin/true"], allocation=1, consumer="/Apps/x"), "h1")
        r = _report(runner, 1)
        assert r["state"] == "failed"
        assert r["reason"] == (f"user (none named for /Apps/x) refused on h1: every uid of --dynamic-users "
                               f"{nobody}-{nobody} is taken")
    finally:
        runner.close(kill=True)


def test_start_command_consumer_is_checked() -> None:
    base = {"activity": 1, "argv": ["x"]}
    assert Start.from_json(base | {"consumer": "/A/b"}).consumer == "/A/b"
    assert Start.from_json(base).consumer is None
    for bad in (3, "A", "/A\x00"):
        with pytest.raises(ValueError, match="consumer"):
            Start.from_json(base | {"consumer": bad})


# -- end to end: a real master sends each start's consumer ---------------------------------------------
PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
  - {path: /B}
  - {path: /N, execution_user: nobody}
"""


@needs_root
def test_a_real_master_and_agent_give_each_consumer_its_uid_and_say_why_a_disk_kill(tmp_path: Path) -> None:
    from tests.service.live import granted, reap, running, start_agent, start_master

    m = start_master(tmp_path, PLAN, extra=["--tick", "0.3"])
    agent = start_agent(m, "h1", tmp_path / "h1", slots=6, extra=["--disk-per-slot", "0.001"])  # about 1 MiB
    try:
        with m.http() as c:
            wait_until(lambda: any(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]), 30, "h1 up")
            uids = {}
            for consumer in ("/A", "/B", "/N"):
                _, alloc = granted(c, consumer.strip("/").lower(), consumer, 2)
                act, pid = running(c, alloc, "h1", [PY, "-c", "import time; time.sleep(60)"])
                got = wait_until(lambda: (x := c.get(f"/v1/activities/{act}").json())["uid"] is not None and x, 20,
                                 "who it runs as")
                assert os.stat(f"/proc/{pid}").st_uid == got["uid"]
                uids[consumer] = (got["user"], got["uid"], alloc)
            assert uids["/A"][1] != uids["/B"][1] and LO <= uids["/A"][1] <= HI and LO <= uids["/B"][1] <= HI
            assert uids["/A"][0] == f"dynamic-{uids['/A'][1]}"
            assert uids["/N"][:2] == ("nobody", pwd.getpwnam("nobody").pw_uid)  # the plan's user still works
            # an activity that fills its directory past 1 MiB is killed, and its stop reason says why
            fill = [PY, "-c", "import os, time\nopen('big', 'wb').write(os.urandom(8 << 20))\ntime.sleep(60)"]
            act = c.post(f"/v1/allocations/{uids['/B'][2]}/activities", json={"host": "h1", "argv": fill}).json()["id"]
            end = wait_until(lambda: (x := c.get(f"/v1/activities/{act}").json())["state"] not in
                             ("starting", "running") and x, 40, "the filler killed")
            assert (end["state"], end["signal"]) == ("killed", 9), end
            assert end["stop_reason"].startswith("disk: its directory ") and "(--disk-per-slot)" in end["stop_reason"]
            assert f"over its limit {int(0.001 * 2**30) / 2**20:.0f} MiB" in end["stop_reason"], end
    finally:
        agent.kill(signal.SIGTERM)
        m.proc.kill()
        reap()
