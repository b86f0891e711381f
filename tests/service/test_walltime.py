"""Walltimes live (service/walltimes.py): ``POST /v1/allocations`` takes how long the work
runs once started, the master notes when each allocation first held its min
(``started_at``), both are stored, and a restarted master gives the engine the start
times back, so the planned starts it shows are the ones it showed before. The SDK's
``allocate(walltime=)`` and ``apportion run --walltime`` pass it on.

A real master on loopback with a real agent (hosts come from agents), on both stores."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from apportion.client import Client
from apportion.client._calls import walltime_of
from tests.service.live import CLI, events, one_host, start_agent, start_master, wait_until
from tests.service.test_rigid_live import (
    PLAN,
    ask,
    completed,
    gate_dir,
    gated,
    job,
    listed,
)

BAD = [(0, "greater than 0"), (-5, "greater than 0"), (1e9, "less than or equal to 100000000"),
       ("60", "valid number"), (True, "valid number"), ([60], "valid number"), ({"s": 60}, "valid number")]


def _up(c) -> None:
    wait_until(lambda: any(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]), 20, "h1 up")


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    with one_host(tmp_path_factory.mktemp("walltime"), PLAN, "h1", 8) as m:
        yield m


def test_a_bad_walltime_is_refused_naming_the_field_and_nothing_is_made(one):
    with one.http() as c:
        cl = c.post("/v1/clients", json={"name": "bad", "consumer": "/A"}).json()["id"]
        before = listed(c)
        for value, why in BAD:
            r = c.post("/v1/allocations", json={"client": cl, "consumer": "/A", "max": 1, "walltime": value})
            assert r.status_code == 422, (value, r.text)
            d = r.json()["detail"]
            assert [x["loc"] for x in d] == [["body", "walltime"]] and why in d[0]["msg"], (value, d)
        for text in ('{"client": %d, "consumer": "/A", "max": 1, "walltime": NaN}',
                     '{"client": %d, "consumer": "/A", "max": 1, "walltime": Infinity}'):
            r = c.post("/v1/allocations", content=text % cl, headers={"Content-Type": "application/json"})
            assert r.status_code == 422 and "walltime" in r.text, r.text
        assert listed(c) == before
        assert events(c, cl) == []
        # the SDK says so before sending
        for value, _ in BAD[:4] + [(float("nan"), ""), (float("inf"), "")]:
            with pytest.raises(ValueError, match="walltime"):
                walltime_of(value)
        assert c.delete(f"/v1/clients/{cl}").status_code == 204


def test_the_sdk_passes_the_walltime_and_get_shows_it_with_the_start(one):
    with Client(one.url, token=one.token) as api:
        me = api.register("sdk-walltime", "/A")
        a = api.allocate("/A", "all", 2, 2, walltime=90)
        assert a["walltime"] == 90.0  # (granted, and so started, in the step that made it, if slots were free)
        got = wait_until(lambda: (x := api.allocation(a["id"]))["held"] == 2 and x, 20, "granted 2")
        granted_at = next(e["at"] for e in api.poll_events(me, 0) if e["type"] == "granted")
        assert got["walltime"] == 90.0 and got["started_at"] == granted_at  # the cycle that granted its min
        plain = api.allocate("/A", "all", 0, 1)
        assert plain["walltime"] is None
        got = wait_until(lambda: (x := api.allocation(plain["id"]))["held"] == 1 and x, 20, "granted 1")
        assert isinstance(got["started_at"], float) and got["walltime"] is None
        with pytest.raises(ValueError, match="walltime"):
            api.allocate("/A", "all", 1, 1, walltime=0)
        api.delete(a["id"])
        api.delete(plain["id"])


def test_apportion_run_passes_its_walltime_and_says_when_it_is_planned_to_start(one):
    env = {**os.environ, "APPORTION_TOKEN": one.token}
    gates = gate_dir(one.workdir.parent / "h1")
    p = subprocess.run([*CLI, "run", "--master", one.url, "--consumer", "/B", "--walltime", "0", "--", "true"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "--walltime" in p.stderr, p.stderr
    with one.http() as c:
        assert not any(a["consumer"] == "/B" for a in listed(c).values())
        a = c.post("/v1/clients", json={"name": "holder", "consumer": "/A"}).json()["id"]
        aid = ask(c, a, "/A", 6, walltime=3600)
        wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 6, 20, "A granted 6")
        acts = job(c, aid, gated(gates / "run-holder-done"))
        run = subprocess.Popen([*CLI, "run", "--master", one.url, "--consumer", "/B", "--slots", "6",
                                "--walltime", "120", "--", sys.executable, "-c", "print('ran')"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            mine = wait_until(lambda: next((x for x in listed(c).values() if x["consumer"] == "/B"
                                            and x["planned_start"] is not None), None), 30,
                              "the run's allocation reserved with a planned start")
            assert (mine["walltime"], mine["reserved"], mine["min"]) == (120.0, True, 6)
            started = c.get(f"/v1/allocations/{aid}").json()["started_at"]
            assert abs(mine["planned_start"] - (started + 3600)) < 1e-6
            (gates / "run-holder-done").touch()
            completed(c, acts, "the holder's job")
            assert c.delete(f"/v1/allocations/{aid}").status_code == 204
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        assert run.returncode == 0, (out, err)
        assert out.splitlines() == ["[h1] ran"] * 6, out
        assert "(reserved, planned start at " in err, err
        assert c.delete(f"/v1/clients/{a}").status_code == 204


def test_walltime_and_started_at_survive_a_restart_and_so_does_the_planned_start(tmp_path, db_url):
    m = start_master(tmp_path / "m", PLAN, db=db_url)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=8)
    gates = gate_dir(tmp_path / "h1")
    try:
        with m.http() as c:
            _up(c)
            a, b = (c.post("/v1/clients", json={"name": f"app{x}", "consumer": f"/{x}"}).json()["id"] for x in "AB")
            aid = ask(c, a, "/A", 6, walltime=3600.5)
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 6, 20, "A granted 6")
            acts = job(c, aid, gated(gates / "a-done"))
            bid = ask(c, b, "/B", 8, walltime=10)
            before = wait_until(lambda: (x := listed(c))[bid]["planned_start"] is not None and x, 20,
                                "B's planned start")
        m.restart()
        with m.http() as c:
            _up(c)
            after = wait_until(lambda: (x := listed(c))[bid]["planned_start"] is not None and x, 20,
                               "B's planned start after the restart")
            for aid_ in (aid, bid):
                for k in ("walltime", "started_at", "reserved", "planned_start", "held"):
                    assert after[aid_][k] == before[aid_][k], (aid_, k, before[aid_], after[aid_])
            assert after[aid]["walltime"] == 3600.5 and after[bid]["walltime"] == 10.0
            assert after[bid]["planned_start"] == after[aid]["started_at"] + 3600.5
            assert after[bid]["started_at"] is None
            assert [c.get(f"/v1/activities/{x}").json()["state"] for x in acts] == ["running"]
            # and on from there: A's job ends, B starts with all 8 and notes when
            (gates / "a-done").touch()
            completed(c, acts, "A's job")
            assert c.delete(f"/v1/allocations/{aid}").status_code == 204
            got = wait_until(lambda: (x := c.get(f"/v1/allocations/{bid}").json())["held"] == 8 and x, 30,
                             "B granted 8")
            assert got["started_at"] is not None and got["started_at"] > after[aid]["started_at"]
    finally:
        agent.kill()
        m.proc.kill()


def test_alloc_view_says_the_walltime_the_start_and_the_end_by_it():
    from datetime import datetime

    from apportion.cli.live import _run_time

    t = 1_700_000_000.0
    wall, start, ends = _run_time({"walltime": 90.0, "started_at": t})
    assert wall == "90s"
    assert start.startswith(datetime.fromtimestamp(t).strftime("%H:%M:%S") + " (")
    assert ends.startswith(datetime.fromtimestamp(t + 90).strftime("%H:%M:%S") + " (")
    assert _run_time({"walltime": None, "started_at": t})[0::2] == ["-", "-"]  # no end without a walltime
    assert _run_time({"walltime": 90.0, "started_at": None})[1:] == ["-", "-"]  # not started


def test_the_next_reservation_is_chosen_at_once_not_a_tick_later(tmp_path):
    """When a reservation's request starts while another wide rigid request waits, the engine
    says the next cycle may decide more (the other gets the reservation next). The master runs
    that cycle at once: with a tick of 60 s and heartbeats every 30 s, nothing else would run a
    cycle within the bound below."""
    m = start_master(tmp_path / "m", PLAN, extra=["--tick", "60", "--heartbeat", "30"])
    agent = start_agent(m, "h1", tmp_path / "h1", slots=8)
    try:
        with m.http() as c:
            _up(c)
            a = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
            first = ask(c, a, "/A", 8)
            wait_until(lambda: listed(c)[first]["held"] == 8, 20, "the first granted")
            r1 = ask(c, a, "/A", 8, walltime=500)
            r2 = ask(c, a, "/A", 8, walltime=500)
            wait_until(lambda: listed(c)[r1]["reserved"], 20, "r1 reserved")
            assert not listed(c)[r2]["reserved"]
            assert c.delete(f"/v1/allocations/{first}").status_code in (200, 204)
            # r1 starts in the cycle of the delete; r2 is reserved in the one right after it
            got = wait_until(lambda: (x := listed(c))[r1]["held"] == 8 and x[r2]["reserved"] and x, 10,
                             "r1 started and r2 reserved at once")
            assert got[r2]["planned_start"] == pytest.approx(got[r1]["started_at"] + 500, abs=1e-3), got[r2]
    finally:
        agent.kill()
        m.proc.kill()
