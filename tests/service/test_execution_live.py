"""Execution users, limits and usage end to end (issue 17): a real master, real agents running
as root, real processes and real OS users.

- an activity of a consumer with an ``execution_user`` runs with that user's uid: ``id -u`` in
  its output and /proc say so; its JSON has user, uid, limits and usage after it ran;
- a consumer whose execution user is ``root``, and one whose user the agent bans, are refused:
  the activity ends ``failed`` with a reason naming the user, the host and the rule, nothing is
  started, and the allocation and the other activities are untouched;
- a DUCC process that goes beyond its share's memory is killed by the kernel; the try of its
  item fails with ShareSizeExceeded and the item is done by another process.

They need root (switching users, cgroups): elsewhere they skip, saying so.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.service.live import (
    CLI,
    Master,
    events,
    granted,
    reap,
    running,
    start_agent,
    start_master,
    wait_until,
)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the agent switches users and makes cgroups"),
    pytest.mark.skipif(shutil.which("useradd") is None, reason="needs useradd/userdel to make a test user"),
]

GB = 2**30


@pytest.fixture
def os_user() -> Any:
    """A fresh OS user (no home made) with a free uid >= 1000, removed afterwards."""
    name = f"aptest{uuid.uuid4().hex[:8]}"
    taken = {p.pw_uid for p in pwd.getpwall()}
    uid = next(u for u in range(20000 + os.getpid() % 10000, 60000) if u not in taken)
    subprocess.run(["useradd", "-M", "-u", str(uid), "-s", "/bin/sh", name], check=True, capture_output=True)
    try:
        yield name, uid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def _plan(user: str) -> str:
    return f"""
resource_groups:
  - {{name: all, select: "select(slots > 0)"}}
consumers:
  - {{path: /Apps, execution_user: {user}}}
  - {{path: /Apps/batch}}
  - {{path: /Apps/small}}
  - {{path: /Admin, execution_user: root}}
  - {{path: /Evil, execution_user: mallory}}
"""


def _stop(m: Master, agents: list[Any]) -> None:
    for a in agents:
        a.kill(signal.SIGTERM)
    m.proc.kill()
    reap()


def _ended(c: httpx.Client, act: int, timeout: float = 20) -> dict[str, Any]:
    return wait_until(lambda: (x := c.get(f"/v1/activities/{act}").json())["state"] not in ("starting", "running")
                      and x, timeout, f"activity {act} ended")


def _proc_uids(pid: int) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no Uid line for {pid}")


def test_execution_users_run_as_themselves_and_refused_users_start_nothing(tmp_path: Path, os_user) -> None:
    name, uid = os_user
    m = start_master(tmp_path, _plan(name), extra=["--tick", "0.3"])
    agent = start_agent(m, "h1", tmp_path / "h1", slots=4,
                        extra=["--memory", "8", "--banned-users", "root,mallory"])
    try:
        with m.http() as c:
            wait_until(lambda: any(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]), 30, "h1 up")
            host = c.get("/v1/hosts").json()["hosts"][0]
            assert host["containment"] in ("cgroup-v1", "cgroup-v2", "process-group"), host
            assert host["run_as"] == {"root": True, "user": "root"}, host
            assert host["closed_reason"] is None and host["alien"] is None or isinstance(host["alien"], int)

            # a consumer below /Apps inherits its execution user
            client, aid = granted(c, "batch", "/Apps/batch", 2)
            act, pid = running(c, aid, "h1", ["sh", "-c", "id -u; exec sleep 60"])
            out = wait_until(lambda: c.get(f"/v1/activities/{act}/output").json()["stdout"], 20, "id -u printed")
            assert out == [str(uid)], out
            assert _proc_uids(pid) == [uid] * 4  # real, effective, saved and filesystem uid
            got = wait_until(lambda: (x := c.get(f"/v1/activities/{act}").json())["usage"] and x, 20, "usage")
            assert got["user"] == name and got["uid"] == uid, got
            # the host's memory x slots / the host's slots: 8 GB x 1 / 4
            assert got["limits"]["memory"] == 2 * GB and got["limits"]["cpu_weight"] == 100, got
            assert {"cpu_seconds", "memory", "memory_peak"} <= set(got["usage"]), got

            # an allocation that asks for less memory per slot gets that
            _, small = granted(c, "small", "/Apps/small", 1, memory=0.25)
            act_small, _ = running(c, small, "h1")
            limits = wait_until(lambda: c.get(f"/v1/activities/{act_small}").json()["limits"], 20, "limits")
            assert limits["memory"] == GB // 4, limits

            # root and a banned user are refused: failed, with the user, the host and the rule
            refused = {}
            for consumer, user, rule in (("/Admin", "root", "banned"), ("/Evil", "mallory", "banned")):
                cl, al = granted(c, consumer.strip("/").lower(), consumer, 1)
                a = c.post(f"/v1/allocations/{al}/activities",
                           json={"host": "h1", "argv": ["sh", "-c", "touch /tmp/should-not-exist; sleep 60"]}).json()
                end = _ended(c, a["id"])
                assert end["state"] == "failed" and end["pid"] is None, end
                assert user in end["stop_reason"] and "h1" in end["stop_reason"] and rule in end["stop_reason"], end
                assert c.get(f"/v1/allocations/{al}").json()["held"] == 1  # the allocation keeps its slot
                ev = [e for e in events(c, cl) if e.get("activity") == a["id"] and e["state"] == "failed"]
                assert ev and ev[0]["stop_reason"] == end["stop_reason"] and ev[0]["oom"] is False, ev
                refused[user] = end
            assert not Path("/tmp/should-not-exist").exists()
            refused_id = refused["root"]["id"]
            # the others run on
            assert c.get(f"/v1/activities/{act}").json()["state"] == "running"
            assert _proc_uids(pid)[0] == uid
            listed = c.get("/v1/activities", params={"host": "h1", "state": "failed"}).json()["activities"]
            assert {a["id"] for a in listed} == {e["id"] for e in refused.values()}

            # the CLI lists them with who ran them
            env = {**os.environ, "APPORTION_MASTER": m.url, "APPORTION_TOKEN": m.token, "COLUMNS": "250"}
            r = subprocess.run([*CLI, "activity", "list", "--host", "h1", "--state", "running"], env=env,
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and name in r.stdout and str(uid) in r.stdout, r.stdout + r.stderr
            r = subprocess.run([*CLI, "activity", "view", str(act)], env=env, capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0 and f"as {name} (uid {uid}); memory " in r.stdout, r.stdout + r.stderr
            r = subprocess.run([*CLI, "activity", "view", str(refused_id)], env=env, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0 and "why: user root" in r.stdout, r.stdout + r.stderr
            r = subprocess.run([*CLI, "host", "list"], env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and host["containment"] in r.stdout, r.stdout + r.stderr

            # at its end the usage is stored: a restarted master shows it
            c.post(f"/v1/activities/{act}/kill")
            end = _ended(c, act)
            assert end["usage"] is not None and end["user"] == name and end["uid"] == uid, end
            m.restart()
            again = c.get(f"/v1/activities/{act}").json()
            assert (again["usage"], again["limits"], again["uid"]) == (end["usage"], end["limits"], uid), again
            assert c.get(f"/v1/activities/{refused['root']['id']}").json()["stop_reason"] == \
                refused["root"]["stop_reason"]
    finally:
        _stop(m, [agent])


HOG = [sys.executable, "-c", """
import os, sys
from apportion.client import work
mark = os.path.join(sys.argv[1], "hogged")
items = work()
for n in items:
    if not os.path.exists(mark):   # the first process only, holding what it was given
        open(mark, "w").close()
        hog = b"x" * (1536 << 20)   # 1.5 GiB, beyond the 1 GiB share: the kernel kills this process
        print("survived", len(hog), flush=True)
"""]


def test_a_ducc_process_beyond_its_share_fails_its_items_with_share_size_exceeded(tmp_path: Path) -> None:
    marks = Path(tempfile.mkdtemp(prefix="aptest-marks-"))
    marks.chmod(0o1777)  # the processes run as nobody
    plan = ("ducc:\n  properties: {ducc.rm.share.quantum: 1, ducc.rm.prediction: false}\n"
            "  accounts: {'*': nobody}\n")
    m = start_master(tmp_path, plan, extra=["--tick", "0.3", "--kill-grace", "2"])
    agents = [start_agent(m, h, tmp_path / h, extra=["--memory", "4"]) for h in ("h0", "h1")]
    try:
        with m.http() as c:
            wait_until(lambda: len([h for h in c.get("/v1/hosts").json()["hosts"] if h["state"] == "ok"]) == 2,
                       30, "two agents")
            hosts = c.get("/v1/hosts").json()["hosts"]
            if any(h["containment"] == "process-group" for h in hosts):
                pytest.skip("no cgroup memory controller here: a memory limit needs cgroups (cgroup-v1 or v2)")
            jid = c.post("/v1/jobs", json={"memory": 1, "threads": 3, "work": [0, 1, 2], "retries": 3,
                                           "argv": [*HOG, str(marks)]}).json()["id"]
            j = wait_until(lambda: (x := c.get(f"/v1/jobs/{jid}").json())["state"] in ("done", "failed") and x,
                           120, f"job {jid} ended")
            assert j["state"] == "done" and j["items"]["done"] == 3 and j["items"]["failed"] == 0, j
            evs = events(c, j["client"])
            failed = [e for e in evs if e["type"] == "items_failed"]
            assert len(failed) == 1 and failed[0]["error"].startswith("ShareSizeExceeded"), failed
            assert 0 in failed[0]["items"], failed  # at least the item it was working on
            ooms = [e for e in evs if e["type"] == "activity" and e.get("oom")]
            assert len(ooms) == 1 and ooms[0]["state"] == "killed" and "out of memory" in ooms[0]["stop_reason"], ooms
            act = c.get(f"/v1/activities/{ooms[0]['activity']}").json()
            assert act["oom"] is True and act["limits"]["memory"] == GB and act["user"] == "nobody", act
            # every item was done by a process other than the one killed holding it
            killed_share = {i: e["share"] for e in failed for i in e["items"]}
            eng = create_engine(m.db)
            try:
                with eng.connect() as conn:
                    rows = conn.execute(text("SELECT idx, state, share, attempts FROM job_items WHERE job = :j"),
                                        {"j": jid}).all()
            finally:
                eng.dispose()
            assert {idx for idx, *_ in rows} == {0, 1, 2}
            for idx, state, share, attempts in rows:
                assert state == "done", (idx, state)
                if idx in killed_share:  # a failed try, then done by another process
                    assert share != killed_share[idx] and attempts == 2, (idx, share, attempts)
            # the host and the other work are unharmed
            assert all(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"])
            assert json.dumps(j)  # the job's view stays JSON
    finally:
        _stop(m, agents)
        shutil.rmtree(marks, ignore_errors=True)
