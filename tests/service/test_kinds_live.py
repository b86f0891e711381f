"""Multi-resource requests on the live master: a real master on loopback, real (light) agents
reporting resource vectors (``--cores``, ``--memory``, ``--gpus``, ``--resource NAME=N``).

- placement is the engine's: a GPU request lands only where GPUs are, a custom kind only where
  it is reported, and per-kind limits of the plan hold;
- Dominant Resource Fairness across kinds, live: the paper's example (Ghodsi et al., NSDI 2011)
  gives 3 and 2 tasks, and a master restart keeps every allocation where it was;
- per-kind ownership reclaims from a borrower after its grace; the borrower's process that
  still uses what was taken is stopped, and the owner is granted only once it is gone;
- bad vectors are refused with 422 naming the field, and nothing changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.service.live import Master, events, granted, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: gpu, hosts: [c1, g1]}
  - {name: drf, hosts: [m1]}
  - {name: own, hosts: [o1]}
consumers:
  - {path: /G, resource_groups: [gpu]}
  - {path: /L, resource_groups: [gpu], groups: {gpu: {max: {cores: 2}}}}
  - {path: /A, resource_groups: [drf]}
  - {path: /B, resource_groups: [drf]}
  - {path: /T, resource_groups: [own], groups: {own: {owned: {gpus: 2}, lend: [gpus]}}}
  - {path: /R, resource_groups: [own], grace: 1}
"""
HOSTS = {  # c1 comes first in gpu's order: a request placed as plain slots would go there
    "c1": ["--slots", "4", "--cores", "4", "--memory", "16", "--gpus", "0", "--resource", "fpga=1"],
    "g1": ["--slots", "4", "--cores", "4", "--memory", "16", "--gpus", "2"],
    "m1": ["--slots", "9", "--cores", "9", "--memory", "18", "--gpus", "0"],
    "o1": ["--slots", "4", "--cores", "4", "--memory", "16", "--gpus", "2"],
}


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Master]:
    tmp = tmp_path_factory.mktemp("kinds-live")
    m = start_master(tmp / "m", PLAN, extra=["--tick", "0.2"])
    agents = [start_agent(m, name, tmp / name, slots=int(flags[1]), extra=["--light", *flags[2:]])
              for name, flags in HOSTS.items()]
    try:
        with m.http() as c:
            wait_until(lambda: sum(h["state"] == "ok" and h["resources"] is not None
                                   for h in c.get("/v1/hosts").json()["hosts"]) == len(HOSTS), 30, "hosts up")
        yield m
    finally:
        for a in agents:
            a.kill()
        m.proc.kill()


def _ask(c: httpx.Client, name: str, consumer: str, mx: int, **body: Any) -> tuple[int, int]:
    """(client, allocation) asked for, not waited for."""
    client = c.post("/v1/clients", json={"name": name, "consumer": consumer}).json()["id"]
    r = c.post("/v1/allocations", json={"client": client, "consumer": consumer, "max": mx, **body})
    assert r.status_code == 201, r.text
    return client, r.json()["id"]


def _alloc(c: httpx.Client, aid: int) -> dict[str, Any]:
    return c.get(f"/v1/allocations/{aid}").json()


def _host(c: httpx.Client, name: str) -> dict[str, Any]:
    return next(h for h in c.get("/v1/hosts").json()["hosts"] if h["name"] == name)


def test_placement_is_where_every_kind_fits(master: Master) -> None:
    with master.http() as c:
        _, x = _ask(c, "x", "/G", 3, resources={"gpus": 1, "cores": 1})
        _, f = _ask(c, "f", "/G", 2, resources={"custom": {"fpga": 1}})
        _, lim = _ask(c, "l", "/L", 4, resources={"cores": 1})
        wait_until(lambda: (_alloc(c, x)["held"], _alloc(c, f)["held"], _alloc(c, lim)["held"]) == (2, 1, 2), 20,
                   "x on the GPUs, f on the FPGA, l at its limit")
        # a plain slot asked after them goes where they did not (c1 first): the cycles that served
        # it had x's third GPU instance, f's second FPGA and l's third core to place, and could not
        _, y = granted(c, "y", "/G", 1)
        assert _alloc(c, y)["hosts"] == {"c1": 1}
        got = {a: _alloc(c, a) for a in (x, f, lim)}
        assert got[x]["hosts"] == {"g1": 2} and got[x]["held"] == 2, got[x]  # never on c1, no GPU there
        assert got[f]["hosts"] == {"c1": 1}, got[f]  # only c1 reports an fpga
        assert got[f]["resources"]["custom"] == {"fpga": 1}
        assert got[lim]["held"] == 2, got[lim]  # max: {cores: 2} in gpu, with cores to spare
        assert _host(c, "g1")["resources_used"]["gpus"] == 2 and _host(c, "c1")["resources_used"]["fpga"] == 1
        # the GPUs freed, the third instance goes where they are
        assert c.post(f"/v1/allocations/{x}/release", json={"slots": {"g1": 1}}).status_code == 200
        wait_until(lambda: _alloc(c, x)["held"] == 2, 20, "x granted again")
        assert _alloc(c, x)["hosts"] == {"g1": 2}
        for a in (x, f, lim, y):
            c.delete(f"/v1/allocations/{a}")


def test_dominant_resource_fairness_live_and_across_a_restart(master: Master) -> None:
    """<9 cores, 18 GB>; A's tasks <1, 4>, B's <3, 1>, equal shares: A gets 3 tasks, B 2."""
    with master.http() as c:
        # both asked while m1 is closed, so one cycle weighs them together when it opens
        assert c.post("/v1/hosts/m1/close", json={}).status_code == 200
        _, a = _ask(c, "a", "/A", 100, resources={"cores": 1, "memory": 4})
        _, b = _ask(c, "b", "/B", 100, resources={"cores": 3, "memory": 1})
        assert c.post("/v1/hosts/m1/open").status_code == 200
        wait_until(lambda: (_alloc(c, a)["held"], _alloc(c, b)["held"]) == (3, 2), 20, "A 3 tasks, B 2")
        rows = {(r["consumer"], r["group"]): r["resources_used"] for r in c.get("/v1/consumers").json()["consumers"]}
        assert rows[("/A", "drf")] == {"slots": 3, "cores": 3, "memory": 12, "gpus": 0}
        assert rows[("/B", "drf")] == {"slots": 2, "cores": 6, "memory": 2, "gpus": 0}
        m1 = _host(c, "m1")
        assert m1["used"] == 5 and m1["free"] == 0, m1  # every core is held: no plain slot fits either
        held = {x: (_alloc(c, x)["hosts"], _alloc(c, x)["held"]) for x in (a, b)}
        # a host that joins makes the plan again: the vector allocations carry over
        r = c.post("/v1/agents/n1/register", json={"slots": 1, "memory": 1.0, "os": "Linux", "resources": {"cores": 1}})
        assert r.status_code == 200, r.text
        granted(c, "q0", "/G", 1)  # a cycle after it
        assert {x: (_alloc(c, x)["hosts"], _alloc(c, x)["held"]) for x in (a, b)} == held

        master.restart()
        assert {x: (_alloc(c, x)["hosts"], _alloc(c, x)["held"]) for x in (a, b)} == held
        # the engine holds them as vectors again: a task of A given back comes back to A (one cycle),
        # and nothing more fits (as plain slots, 4 of m1's 9 would be free for both)
        assert c.post(f"/v1/allocations/{a}/release", json={"slots": {"m1": 1}}).status_code == 200
        wait_until(lambda: _alloc(c, a)["held"] == 3, 20, "A's task back")
        _, probe = _ask(c, "p", "/B", 1, resources={"cores": 1})
        _, plain = granted(c, "q", "/G", 1)  # a cycle that passed the probe over
        assert _alloc(c, probe)["held"] == 0 and (_alloc(c, a)["held"], _alloc(c, b)["held"]) == (3, 2)
        for x in (a, b, probe, plain):
            c.delete(f"/v1/allocations/{x}")


def test_owned_gpus_are_reclaimed_after_the_borrowers_process_is_gone(master: Master) -> None:
    with master.http() as c:
        r_client, r = granted(c, "r", "/R", 2, resources={"gpus": 1})  # /T lends its idle GPUs
        act = c.post(f"/v1/allocations/{r}/activities", json={"host": "o1", "argv": ["true"], "slots": 2}).json()
        assert act["devices"] == {"gpus": [0, 1]}, act
        wait_until(lambda: c.get(f"/v1/activities/{act['id']}").json()["state"] == "running", 20, "running")
        t_client, t = _ask(c, "t", "/T", 1, resources={"gpus": 1})
        wait_until(lambda: _alloc(c, t)["held"] == 1, 20, "T granted its own GPU")
        mine = events(c, r_client)
        kinds = [e["type"] for e in mine if e.get("allocation") == r]
        assert "reclaim" in kinds and "removed" in kinds, mine
        ended = next(e for e in mine if e["type"] == "activity" and e["state"] == "killed")
        grant = next(e for e in events(c, t_client) if e["type"] == "granted")
        # the GPU went to T only once the process that used it was gone
        assert grant["id"] > ended["id"], (ended, grant)
        assert c.get(f"/v1/activities/{act['id']}").json()["stop_reason"] == "reclaimed"
        assert _alloc(c, r)["held"] == 1 and _alloc(c, t)["hosts"] == {"o1": 1}
        for x in (r, t):
            c.delete(f"/v1/allocations/{x}")


@pytest.mark.parametrize(("resources", "field"), [
    ({"gpus": -1}, "gpus"), ({"cores": float("nan")}, "cores"), ({"memory": 1e12}, "memory"),
    ({"cores": 1e9}, "cores"), ({"tpus": 1}, "tpus"), ({"custom": {"fpga": -2}}, "fpga"),
    ({"custom": {"cores": 1}}, "custom"), ({"custom": {"fp ga": 1}}, "custom"),
])
def test_bad_vectors_are_refused_naming_the_field(master: Master, resources: dict, field: str) -> None:
    with master.http() as c:
        before = c.get("/v1/allocations").json()["allocations"]
        client = c.post("/v1/clients", json={"name": "bad", "consumer": "/G"}).json()["id"]
        # sent as Python writes JSON: NaN as NaN, which strict JSON does not have
        body = json.dumps({"client": client, "consumer": "/G", "max": 1, "resources": resources})
        r = c.post("/v1/allocations", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and field in r.text, (resources, r.text)
        assert c.get("/v1/allocations").json()["allocations"] == before


def test_exclusive_with_resources_is_refused(master: Master) -> None:
    with master.http() as c:
        client = c.post("/v1/clients", json={"name": "ex", "consumer": "/G"}).json()["id"]
        r = c.post("/v1/allocations", json={"client": client, "consumer": "/G", "max": 1, "exclusive": True,
                                            "resources": {"cores": 1}})
        assert r.status_code == 422 and "exclusive" in r.text, r.text
