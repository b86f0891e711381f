"""`apportion bench service`: the store checker on crafted histories (it must catch a double
grant, a lost allocation, a gap), and one short real run (master, agents and client
processes) whose own checks pass and whose figures are sane."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from apportion.bench.service_check import StoreView, check
from apportion.bench.service_load import Pace
from apportion.cli.main import app


def granted(eid: int, client: int, alloc: int, host: str, at: float, slots: int = 1) -> tuple:
    return (eid, client, {"id": eid, "type": "granted", "allocation": alloc, "host": host, "slots": slots, "at": at})


def removed(eid: int, client: int, alloc: int, host: str, at: float, kind: str = "removed") -> tuple:
    return (eid, client, {"id": eid, "type": kind, "allocation": alloc, "host": host, "slots": 1, "at": at})


def rec(aid: int, sent: float, deleted_sent: float | None = None, deleted: bool = True) -> list:
    """[id, create sent, 201, granted, delete sent, delete answered, adopted]"""
    return [aid, sent, sent + 0.001, sent + 0.002, deleted_sent,
            (deleted_sent + 0.001) if (deleted and deleted_sent is not None) else None, False]


def client(cid: int, received: list[int], allocs: list[list]) -> dict:
    return {"id": cid, "received": received, "allocs": allocs, "errors": {}, "retries": {}, "samples": []}


def test_a_clean_history_passes():
    # host h has 1 slot: 1 is granted, deleted, then 2 is granted and still held
    view = StoreView({"h": 1}, [(2, "h", 1)], {2}, [granted(1, 7, 1, "h", 10.0), granted(2, 7, 2, "h", 11.0)])
    f = check(view, [client(7, [1, 2], [rec(1, 9.9, 10.5), rec(2, 10.9, None)])])
    s = f.summary()
    assert s["ok"], s
    assert s["grants_replayed"] == 2 and s["slots_granted_twice"] == 0 and s["allocations_lost"] == 0


def test_a_slot_granted_twice_is_caught_in_the_replay():
    # the second grant comes before the first holder's DELETE was even sent
    view = StoreView({"h": 1}, [], set(), [granted(1, 7, 1, "h", 10.0), granted(2, 8, 2, "h", 10.2)])
    f = check(view, [client(7, [1], [rec(1, 9.9, 10.5)]), client(8, [2], [rec(2, 10.1, 10.6)])])
    s = f.summary()
    assert not s["ok"] and s["replay_overbooked"] == 1 and s["slots_granted_twice"] >= 1
    assert s["examples"]["replay_overbooked"][0]["host"] == "h"


def test_a_removal_frees_the_slot_in_the_replay():
    view = StoreView({"h": 1}, [(2, "h", 1)], {1, 2},
                     [granted(1, 7, 1, "h", 10.0), removed(2, 7, 1, "h", 10.1, "lost"), granted(3, 8, 2, "h", 10.2)])
    f = check(view, [client(7, [1, 2], [rec(1, 9.9, None)]), client(8, [3], [rec(2, 10.1, None)])])
    assert f.summary()["ok"], f.summary()


def test_final_holdings_over_a_hosts_slots_are_caught():
    view = StoreView({"h": 1}, [(1, "h", 1), (2, "h", 1)], {1, 2}, [granted(1, 7, 1, "h", 10.0)])
    s = check(view, [client(7, [1], [rec(1, 9.9, None)])]).summary()
    assert s["final_overbooked"] == 1 and s["slots_granted_twice"] >= 1 and not s["ok"]


def test_an_allocation_granted_more_than_its_max_is_caught():
    view = StoreView({"h": 4}, [], set(), [granted(1, 7, 1, "h", 10.0), granted(2, 7, 1, "h", 10.1)])
    s = check(view, [client(7, [1, 2], [rec(1, 9.9, 10.5)])]).summary()
    assert s["over_max"] == 1 and not s["ok"]


def test_lost_and_resurrected_allocations_are_caught():
    # 1 got its 201 and was never deleted, yet the store lacks it; 2 was deleted (204) yet is there
    view = StoreView({"h": 2}, [], {2}, [])
    s = check(view, [client(7, [], [rec(1, 9.9, None), rec(2, 9.9, 10.0)])]).summary()
    assert s["lost"] == 1 and s["resurrected"] == 1 and s["allocations_lost"] >= 1 and not s["ok"]


def test_a_committed_grant_missing_from_the_holdings_is_caught():
    view = StoreView({"h": 1}, [], {1}, [granted(1, 7, 1, "h", 10.0)])
    s = check(view, [client(7, [1], [rec(1, 9.9, None)])]).summary()
    assert s["grants_missing"] == 1 and not s["ok"]


def test_event_gaps_duplicates_and_unstored_events_are_caught():
    events = [granted(i, 7, i, "h", 10.0 + i) for i in (1, 2, 3, 5)]
    view = StoreView({"h": 9}, [(i, "h", 1) for i in (1, 2, 3, 5)], {1, 2, 3, 5}, events)
    allocs = [rec(i, 9.0 + i, None) for i in (1, 2, 3, 5)]
    s = check(view, [client(7, [1, 3, 3, 5, 6], allocs)]).summary()
    assert s["event_gaps"] == 1 and s["event_order"] == 1 and s["event_unstored"] == 1 and not s["ok"]
    assert s["examples"]["event_gaps"][0]["missing"] == [2]


def test_pace_spreads_creates_at_the_rate():
    import asyncio
    import time

    async def go() -> float:
        p = Pace(200.0, time.time())
        t0 = time.perf_counter()
        for _ in range(41):
            await p.wait()
        return time.perf_counter() - t0

    assert 0.15 <= asyncio.run(go()) < 1.0


@pytest.mark.timeout(60)
def test_a_short_real_run_passes_its_own_checks():
    args = ["bench", "service", "--seconds", "3", "--agents", "3", "--slots-per-agent", "2", "--clients", "6",
            "--load-processes", "2", "--consumers", "2", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    r, m = out["result"], out["machine"]
    assert m["logical_cpus"] >= 1
    assert r["check"]["ok"], r["check"]
    assert r["rate"]["released"] > 0 and r["rate"]["released_per_s"] > 0
    gl = r["grant_latency"]
    assert 0 < gl["p50_s"] <= gl["p95_s"] <= gl["p99_s"] <= gl["max_s"] < 30
    assert r["errors"]["total"] == 0, r["errors"]
    assert r["cpu"]["master_s"] > 0 and r["cpu"]["load_s"] > 0
    assert r["master_rss_mib"]["peak"] > 10
    assert r["check"]["grants_replayed"] >= r["rate"]["released"] - 20
    assert set(r["targets"]) == {"rate", "p50_s", "p99_s"}


def test_a_loss_written_after_the_regrant_of_the_same_step_is_no_double_grant():
    # one master step: host a goes down (1 lost) and the engine grants 1 again on b; the
    # step writes the grant (2) before the loss (3). Then a second step grants 2 on a.
    events = [granted(1, 7, 1, "a", 10.0), granted(2, 7, 1, "b", 11.0), removed(3, 7, 1, "a", 11.0, "lost"),
              granted(4, 8, 2, "a", 12.0)]
    view = StoreView({"a": 1, "b": 1}, [(1, "b", 1), (2, "a", 1)], {1, 2}, events)
    s = check(view, [client(7, [1, 2, 3], [rec(1, 9.9, None)]), client(8, [4], [rec(2, 11.9, None)])]).summary()
    assert s["ok"], s
    # but a grant on a full host in a later step (after a loss elsewhere) is caught
    events = [granted(1, 7, 1, "a", 10.0), removed(2, 9, 3, "b", 10.5, "lost"), granted(3, 8, 2, "a", 11.0)]
    view = StoreView({"a": 1, "b": 1}, [], {1, 2, 3}, events)
    s = check(view, [client(7, [1], [rec(1, 9.9, None)]), client(8, [3], [rec(2, 10.9, None)])]).summary()
    assert s["replay_overbooked"] == 1 and not s["ok"]


@pytest.mark.timeout(60)
def test_a_short_run_with_multi_resource_requests():
    args = ["bench", "service", "--seconds", "2", "--agents", "2", "--slots-per-agent", "2", "--clients", "4",
            "--load-processes", "1", "--consumers", "2", "--resources", "cores=1,memory=2,gpus=0", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)["result"]
    assert r["spec"]["resources"] == {"cores": 1, "memory": 2, "gpus": 0}
    # a body the master refused (422) would count as an error of each round
    assert r["check"]["ok"] and r["errors"]["total"] == 0 and r["rate"]["released"] > 0, (r["check"], r["errors"])
    # any other name is a custom kind; one that cannot be a name is refused before anything starts
    bad = CliRunner().invoke(app, ["bench", "service", "--resources", "cores=1,2tpus=2"])
    assert bad.exit_code == 2 and "unknown kind '2tpus'" in bad.output, bad.output
