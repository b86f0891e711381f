"""Rigid work on a real master with real agents running real processes.

Two consumers of ratio 1 share one host of 8 slots. /A's rigid request of 6 is
granted and its job (one process on 6 slots) runs. /B's rigid request of 6 comes:
/B deserves 4, and 4 cannot start it, so nothing is reclaimed from /A (that would
end /A's job and leave /B still waiting). /A's job runs to its end; /B's request
then has all 6 at once and its job runs to its end. While it waits,
/v1/allocations and `apportion alloc list` show it reserved.

With walltimes (service/walltimes.py), a reservation's planned start is the end of
the running work it waits for (its start plus its walltime), and a short job starts
early on the slots kept for it (backfill) when it ends before then.

Each job here is a process that runs until the test opens its gate (a file), then
exits 0: the test says when a job ends, and nothing is timed by sleeping.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import httpx

from tests.client.test_live import cli
from tests.service.live import events, hosts_up, one_host, reap, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A, share_ratio: 1, grace: 2}
  - {path: /B, share_ratio: 1, grace: 2}
"""
DONE = ("exited", "killed", "failed", "lost")


def gated(gate: Path) -> list[str]:
    """A job's process: it runs until ``gate`` exists, then exits 0. ``gate`` must be
    reachable by the agent's execution user (an agent's own work directory is)."""
    return [sys.executable, "-c", "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)",
            str(gate)]


def gate_dir(workdir: Path) -> Path:
    """Where gates for the processes of the agent working in ``workdir`` may lie: its
    work directory by its real path (the link tests make to it lies in a directory the
    execution user may not enter)."""
    return workdir.resolve()


def job(c: httpx.Client, aid: int, argv: list[str]) -> list[int]:
    """A job on everything allocation ``aid`` holds: one process per host on its slots
    there, each running; their activity ids."""
    hosts = c.get(f"/v1/allocations/{aid}").json()["hosts"]
    acts = []
    for host, n in sorted(hosts.items()):
        got = c.post(f"/v1/allocations/{aid}/activities", json={"host": host, "argv": argv, "slots": n})
        assert got.status_code == 201, got.text
        acts.append(got.json()["id"])
    for act in acts:
        wait_until(lambda: c.get(f"/v1/activities/{act}").json()["state"] in ("running", *DONE), 20,
                   f"activity {act} of allocation {aid} started")
    return acts


def completed(c: httpx.Client, acts: list[int], what: str, timeout: float = 30) -> None:
    """Wait until every process of a job has ended; each must have exited 0."""
    for act in acts:
        a = wait_until(lambda: (x := c.get(f"/v1/activities/{act}").json())["state"] in DONE and x, timeout,
                       f"{what}: activity {act} ended")
        assert (a["state"], a["exit_code"], a["stop_reason"]) == ("exited", 0, None), (what, a)


def cycles_pass(c: httpx.Client, n: int = 4) -> None:
    """Wait until the master has run ``n`` more cycles (past every grace of these plans)."""
    seen = c.get("/readyz").json()["cycles"]
    wait_until(lambda: c.get("/readyz").json()["cycles"] >= seen + n, 20, f"{n} more cycles")


def ask(c: httpx.Client, client: int, consumer: str, slots: int, **body: object) -> int:
    got = c.post("/v1/allocations", json={"client": client, "consumer": consumer, "group": "all",
                                          "min": slots, "max": slots, **body})
    assert got.status_code == 201, got.text
    return got.json()["id"]


def listed(c: httpx.Client) -> dict[int, dict]:
    return {x["id"]: x for x in c.get("/v1/allocations").json()["allocations"]}


def test_two_rigid_jobs_run_in_turn_and_none_is_ended_for_nothing(tmp_path):
    with one_host(tmp_path, PLAN, "h1", 8) as m, m.http() as c:
        gates = gate_dir(tmp_path / "h1")
        a = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
        b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
        aid = ask(c, a, "/A", 6)
        wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["hosts"] == {"h1": 6}, 20, "A granted 6")
        job_a = job(c, aid, gated(gates / "a-done"))

        bid = ask(c, b, "/B", 6)
        cycles_pass(c)  # with B's request waiting: past its grace, more than once
        assert [e for e in events(c, a) if e["type"] in ("reclaim", "removed")] == []
        assert c.get(f"/v1/allocations/{aid}").json()["reclaiming"] == []
        assert [c.get(f"/v1/activities/{x}").json()["state"] for x in job_a] == ["running"]
        assert c.get(f"/v1/allocations/{bid}").json()["held"] == 0
        # B waits with a reservation (the slots kept for it as they come free); A's job
        # says nothing of how long it runs, so B's planned start is not known
        now = listed(c)
        assert (now[bid]["reserved"], now[bid]["planned_start"]) == (True, None)
        assert (now[aid]["reserved"], now[aid]["planned_start"]) == (False, None)
        assert now[aid]["started_at"] is not None and now[bid]["started_at"] is None
        shown = cli(m, "alloc", "list")
        assert shown.returncode == 0, shown.output
        row = next(line for line in shown.output.splitlines() if line.split()[:1] == [str(bid)])
        assert "reserved, start unknown" in row, shown.output

        # A's job ends; its application lets its slots go: B starts with all 6 at once
        (gates / "a-done").touch()
        completed(c, job_a, "A's job")
        assert c.delete(f"/v1/allocations/{aid}").status_code == 204
        wait_until(lambda: c.get(f"/v1/allocations/{bid}").json()["hosts"] == {"h1": 6}, 30, "B granted 6")
        b_now = c.get(f"/v1/allocations/{bid}").json()
        assert (b_now["reserved"], b_now["planned_start"]) == (False, None)  # started: no reservation
        job_b = job(c, bid, gated(gates / "b-done"))
        (gates / "b-done").touch()
        completed(c, job_b, "B's job")
        assert sum(e["slots"] for e in events(c, b) if e["type"] == "granted") == 6
        for cl in (a, b):
            assert [e for e in events(c, cl) if e["type"] in ("reclaim", "removed", "lost")] == [], cl


PLAN_20 = "resource_groups:\n  - {name: all, select: \"select(slots > 0)\"}\nconsumers:\n" + "".join(
    f"  - {{path: /t{i:02d}, share_ratio: 1, grace: 2}}\n" for i in range(20))


def test_twenty_consumers_each_asking_wider_than_its_share_all_complete(tmp_path):
    # 64 slots on four hosts; twenty consumers (a share of 3.2 each) each ask for 10
    # slots at once, half of them saying how long their job runs. Each job runs a
    # process on each host of its slots, and its allocation is let go once they have
    # exited: every one starts in its turn and completes, and none is ended by a reclaim
    m = start_master(tmp_path / "m", PLAN_20)
    agents = [start_agent(m, f"h{i}", tmp_path / f"h{i}", slots=16) for i in range(4)]
    quick = [sys.executable, "-c", "pass"]
    try:
        with m.http() as c:
            hosts_up(c, 4)
            ids: dict[int, int] = {}  # allocation -> client
            for i in range(20):
                cl = c.post("/v1/clients", json={"name": f"app{i}", "consumer": f"/t{i:02d}"}).json()["id"]
                ids[ask(c, cl, f"/t{i:02d}", 10, **({"walltime": 600} if i % 2 else {}))] = cl
            done: set[int] = set()

            def a_job_ran() -> bool:
                for aid in sorted(set(ids) - done):
                    if c.get(f"/v1/allocations/{aid}").json()["held"] == 10:
                        completed(c, job(c, aid, quick), f"the job of allocation {aid}")
                        assert c.delete(f"/v1/allocations/{aid}").status_code == 204
                        done.add(aid)
                        return True
                return False

            while len(done) < 20:
                wait_until(a_job_ran, 30, f"one more job to run ({len(done)} of 20 so far)")
            for aid, cl in ids.items():
                assert [e for e in events(c, cl) if e["type"] in ("reclaim", "removed", "lost")] == [], aid
                assert sum(e["slots"] for e in events(c, cl) if e["type"] == "granted") == 10, aid
    finally:
        for a in agents:
            a.kill()
        m.proc.kill()


def test_a_planned_start_from_a_walltime_and_a_short_job_backfilled_meanwhile(tmp_path):
    # one host of 8: /A's job of 6 says it runs an hour; /B's rigid request of 8 waits for
    # it with a reservation, planned to start when /A's job ends by its walltime. Of /A's
    # two more jobs of 2 slots, the one that would run past that start waits; the one that
    # ends before it runs at once on the 2 slots kept for /B, and /B's start does not move
    wall = 3600.0
    with one_host(tmp_path, PLAN, "h1", 8) as m, m.http() as c:
        gates = gate_dir(tmp_path / "h1")
        a, b = (c.post("/v1/clients", json={"name": f"app{x}", "consumer": f"/{x}"}).json()["id"]
                for x in "AB")
        aid = ask(c, a, "/A", 6, walltime=wall)
        wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 6, 20, "A granted 6")
        job_a = job(c, aid, gated(gates / "a-done"))
        got = c.get(f"/v1/allocations/{aid}").json()
        assert got["walltime"] == wall and isinstance(got["started_at"], float)
        end_a = got["started_at"] + wall

        bid = ask(c, b, "/B", 8)
        b_now = wait_until(lambda: (x := listed(c)[bid])["planned_start"] is not None and x, 20,
                           "B's planned start")
        assert b_now["reserved"] is True and b_now["held"] == 0
        assert abs(b_now["planned_start"] - end_a) < 1e-6, (b_now, end_a)
        # the console's queue and the CLI say the same
        row = next(w for w in c.get("/v1/queue").json()["waiting"] if w["id"] == bid)
        assert (row["reserved"], row["planned_start"]) == (True, b_now["planned_start"])
        shown = cli(m, "alloc", "list")
        line = next(x for x in shown.output.splitlines() if x.split()[:1] == [str(bid)])
        stamp = datetime.fromtimestamp(b_now["planned_start"]).strftime("%H:%M:%S")
        assert f"reserved, planned start at {stamp}" in line, shown.output

        # a job that would run past B's planned start waits (nothing is free beyond B's 8)
        long_id = ask(c, a, "/A", 2, slots_per_instance=2, walltime=2 * wall)
        cycles_pass(c)
        assert c.get(f"/v1/allocations/{long_id}").json()["held"] == 0
        # one that ends before it starts at once, on the 2 slots kept for B
        short_id = ask(c, a, "/A", 2, slots_per_instance=2, walltime=60)
        wait_until(lambda: c.get(f"/v1/allocations/{short_id}").json()["hosts"] == {"h1": 2}, 20,
                   "the short job backfilled")
        job_c = job(c, short_id, gated(gates / "c-done"))
        now = listed(c)
        assert (now[bid]["reserved"], now[bid]["held"], now[bid]["planned_start"]) == \
            (True, 0, b_now["planned_start"])
        assert now[long_id]["held"] == 0
        (gates / "c-done").touch()
        completed(c, job_c, "the short job")
        assert c.delete(f"/v1/allocations/{short_id}").status_code == 204
        cycles_pass(c, 2)
        assert c.get(f"/v1/allocations/{long_id}").json()["held"] == 0  # its 2 are kept for B again

        # A's job ends: B starts with all 8, runs and completes
        (gates / "a-done").touch()
        completed(c, job_a, "A's job")
        assert c.delete(f"/v1/allocations/{aid}").status_code == 204
        wait_until(lambda: c.get(f"/v1/allocations/{bid}").json()["held"] == 8, 30, "B granted 8")
        job_b = job(c, bid, gated(gates / "b-done"))
        (gates / "b-done").touch()
        completed(c, job_b, "B's job")
        for cl in (a, b):
            assert [e for e in events(c, cl) if e["type"] in ("reclaim", "removed", "lost")] == [], cl


PLAN_OWNER = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /O, owned: 2, lend: true, grace: 2}
  - {path: /B, share_ratio: 1, grace: 2}
"""


def test_a_rigid_job_an_owner_takes_slots_back_from_ends_whole(tmp_path):
    # two hosts of 4 slots; /O owns 2 and lends them. /B's rigid job of 8 (one process on
    # each host) runs on the public pool's 6 and /O's 2. /O then wants its 2: the owner's
    # reclaim takes them from the job's slots on one host. Below its min the job runs
    # nothing, so once the reclaim completes the rest of the allocation goes too: no
    # process of the job runs on, and its other slots are not kept idle; /B waits again
    m = start_master(tmp_path / "m", PLAN_OWNER)
    agents = [start_agent(m, f"h{i}", tmp_path / f"h{i}", slots=4) for i in (1, 2)]
    try:
        with m.http() as c:
            hosts_up(c, 2)
            o = c.post("/v1/clients", json={"name": "appO", "consumer": "/O"}).json()["id"]
            b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
            bid = ask(c, b, "/B", 8)
            wait_until(lambda: c.get(f"/v1/allocations/{bid}").json()["held"] == 8, 20, "B granted 8")
            job_b = job(c, bid, gated(tmp_path / "never"))
            got = c.post("/v1/allocations", json={"client": o, "consumer": "/O", "group": "all", "max": 2})
            assert got.status_code == 201, got.text
            oid = got.json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{oid}").json()["held"] == 2, 30, "O given its 2 back")
            wait_until(lambda: c.get(f"/v1/allocations/{bid}").json()["held"] == 0, 30, "B's rest given back")
            for act in job_b:
                a = wait_until(lambda: (x := c.get(f"/v1/activities/{act}").json())["state"] in DONE and x, 30,
                               f"B's process {act} ended")
                assert a["state"] == "killed", a
            removed = [e for e in events(c, b) if e["type"] == "removed"]
            assert sum(e["slots"] for e in removed) == 8, removed
            assert sum(e["slots"] for e in removed if e["reason"].startswith("below min")) == 6, removed
            cycles_pass(c)
            assert c.get(f"/v1/allocations/{bid}").json()["held"] == 0  # it waits for /O's 2 again
    finally:
        for a in agents:
            a.kill()
        m.proc.kill()
        reap()
