"""Quotas per consumer, listing and deleting clients, removing a dead host (issue 18, "Why" 7
and 9): one consumer token could make clients and allocations without end, clients could be
neither listed nor deleted, and a dead host stayed for ever."""

from __future__ import annotations

import httpx
import pytest

from tests.service.live import SLEEPER, host_state, start_agent, start_master, wait_until
from tests.service.test_scope import snapshot

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /Q, quota: {clients: 2, allocations: 2, activities: 1, demand: 5}}
  - {path: /Q/leaf}
  - {path: /A}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quotas")
    m = start_master(tmp / "m", PLAN)
    agent = start_agent(m, "h1", tmp / "h1", slots=4, extra=["--light"])
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            tok = {k: c.post("/v1/tokens", json={"kind": "consumer", "consumer": f"/{k}"}).json()["token"]
                   for k in ("Q", "A")}
        yield m, tok
    finally:
        agent.kill()
        m.proc.kill()


def over(r: httpx.Response, limit: str, consumer: str) -> None:
    assert r.status_code == 429, r.text
    detail = r.json()["detail"]
    assert f"quota.{limit}" in detail and consumer in detail, detail


def test_quotas_refuse_with_429_naming_the_limit_and_change_nothing(world):
    m, tok = world
    with m.http(tok["Q"]) as c:
        c1 = c.post("/v1/clients", json={"name": "q1", "consumer": "/Q"}).json()["id"]
        c.post("/v1/clients", json={"name": "q2", "consumer": "/Q/leaf"}).raise_for_status()
        before = snapshot(m)
        over(c.post("/v1/clients", json={"name": "q3", "consumer": "/Q/leaf"}), "clients", "/Q")
        assert c.post("/v1/clients", json={"name": "q1", "consumer": "/Q"}).status_code == 201  # again: the same
        a1 = c.post("/v1/allocations", json={"client": c1, "consumer": "/Q/leaf", "max": 2}).json()["id"]
        c.post("/v1/allocations", json={"client": c1, "consumer": "/Q/leaf", "max": 1}).raise_for_status()
        before = snapshot(m)
        over(c.post("/v1/allocations", json={"client": c1, "consumer": "/Q/leaf", "max": 1}), "allocations", "/Q")
        over(c.patch(f"/v1/allocations/{a1}", json={"max": 5}), "demand", "/Q")  # 5 + 1 > 5
        assert snapshot(m) == before
        assert c.patch(f"/v1/allocations/{a1}", json={"max": 3}).status_code == 200  # 3 + 1 <= 5
        wait_until(lambda: c.get(f"/v1/allocations/{a1}").json()["held"] == 3, 20, "granted")
        assert c.post(f"/v1/allocations/{a1}/activities", json={"host": "h1", "argv": SLEEPER}).status_code == 201
        over(c.post(f"/v1/allocations/{a1}/activities", json={"host": "h1", "argv": SLEEPER}), "activities", "/Q")
    # another tenant is not held by /Q's quota (the defaults are far away)
    with m.http(tok["A"]) as c:
        for i in range(5):
            assert c.post("/v1/clients", json={"name": f"a{i}", "consumer": "/A"}).status_code == 201


def test_clients_are_listed_in_scope_and_deleted_with_their_allocations(world):
    m, tok = world
    with m.http(tok["A"]) as c:
        mine = c.post("/v1/clients", json={"name": "del-me", "consumer": "/A"}).json()["id"]
        aid = c.post("/v1/allocations", json={"client": mine, "consumer": "/A", "max": 1}).json()["id"]
        listed = c.get("/v1/clients").json()["clients"]
        assert mine in [x["id"] for x in listed] and {x["consumer"] for x in listed} == {"/A"}
    with m.http(tok["Q"]) as c:
        assert all(x["consumer"].startswith("/Q") for x in c.get("/v1/clients").json()["clients"])
        r = c.delete(f"/v1/clients/{mine}")
        assert r.status_code == 403 and "/A" not in r.text
    with m.http(tok["A"]) as c:
        assert c.delete(f"/v1/clients/{mine}").status_code == 204
        assert c.get(f"/v1/clients/{mine}").status_code == 404
        assert c.get(f"/v1/allocations/{aid}").status_code == 404
        assert c.delete(f"/v1/clients/{mine}").status_code == 404
        again = c.post("/v1/clients", json={"name": "del-me", "consumer": "/A"}).json()["id"]
        assert again > mine  # the name is free again; the id is new
    m.restart()
    with m.http(tok["A"]) as c:
        assert c.get(f"/v1/clients/{mine}").status_code == 404
        assert c.post("/v1/clients", json={"name": "after", "consumer": "/A"}).json()["id"] > again


def test_a_dead_host_that_holds_nothing_can_be_removed(world):
    m, tok = world
    with m.http() as c:
        r = c.delete("/v1/hosts/h1")
        assert r.status_code == 409 and "down" in r.json()["detail"]
        assert c.post("/v1/agents/gone/register", json={"slots": 2}).status_code == 200
        wait_until(lambda: host_state(m, "gone") == "down", 20, "the host down (no heartbeat)")
        with m.http(tok["A"]) as mine:
            assert mine.delete("/v1/hosts/gone").status_code == 403
        assert c.delete("/v1/hosts/gone").status_code == 204
        assert "gone" not in {h["name"] for h in c.get("/v1/hosts").json()["hosts"]}
        assert c.delete("/v1/hosts/gone").status_code == 404
    m.restart()
    assert host_state(m, "gone") is None


DUCC_PLAN = ("ducc:\n  properties: {ducc.rm.share.quantum: 1}\n  accounts: {'*': nobody}\n"
             "  quotas: {ann: {jobs: 2}}\n")


def test_a_ducc_user_s_open_work_is_held_by_quota_jobs(tmp_path):
    """Jobs, reservations and services count together against the user's ``quota.jobs`` while
    they are open; an ended one frees its place; another user is not held; a restart counts again."""
    m = start_master(tmp_path / "m", DUCC_PLAN)  # no agent: the work waits, open
    try:
        with m.http() as c:
            first = c.post("/v1/reservations", json={"class": "reserve", "memory": 1, "user": "ann"})
            assert first.status_code == 201, first.text
            r = c.post("/v1/jobs", json={"memory": 1, "user": "ann", "work": [1], "argv": SLEEPER})
            assert r.status_code == 201, r.text
            before = (c.get("/v1/jobs").json(), c.get("/v1/reservations").json(), c.get("/v1/services").json())
            over(c.post("/v1/services", json={"class": "fixed", "memory": 1, "user": "ann", "argv": SLEEPER}),
                 "jobs", "/ann")
            over(c.post("/v1/jobs", json={"memory": 1, "user": "ann", "work": [1], "argv": SLEEPER}), "jobs", "/ann")
            assert (c.get("/v1/jobs").json(), c.get("/v1/reservations").json(),
                    c.get("/v1/services").json()) == before  # nothing changed
            assert c.post("/v1/reservations", json={"class": "reserve", "memory": 1, "user": "bob"}).status_code == 201
            assert c.delete(f"/v1/reservations/{first.json()['id']}").json()["state"] == "cancelled"
            assert c.post("/v1/reservations", json={"class": "reserve", "memory": 1, "user": "ann"}).status_code == 201
            # a quota the plan gets wrong is refused naming it, and nothing changes
            r = c.put("/v1/plan", content=DUCC_PLAN.replace("jobs: 2", "jobs: '3'"))
            assert r.status_code == 422 and "quotas" in r.text, r.text
        m.restart()
        with m.http() as c:
            over(c.post("/v1/reservations", json={"class": "reserve", "memory": 1, "user": "ann"}), "jobs", "/ann")
            assert c.put("/v1/plan", content=DUCC_PLAN.replace("jobs: 2", "jobs: 3")).status_code == 200
            assert c.post("/v1/reservations", json={"class": "reserve", "memory": 1, "user": "ann"}).status_code == 201
            over(c.post("/v1/reservations", json={"class": "reserve", "memory": 1, "user": "ann"}), "jobs", "/ann")
    finally:
        m.proc.kill()


def test_counts_kept_per_subtree_match_a_full_count():
    """The counts a check reads (kept as things come and go) are those a walk over every
    consumer would give, nested quotas and a change of quotas included."""
    import random

    from apportion.service import quotas

    rng = random.Random(7)
    paths = ["/", "/A", "/A/x", "/A/x/y", "/A/z", "/B", "/B/w", "/C/d/e"]
    plans = [{}, {"/A/x": quotas.Quota(clients=3)}, {"/": quotas.Quota(), "/A/x/y": quotas.Quota(), "/B": quotas.Quota()}]
    tally, held = quotas.Tally(), {p: 0 for p in paths}
    for step in range(400):
        p = rng.choice(paths)
        n = rng.choice([1, 1, 2, -1]) if held[p] > 1 else 1
        tally.add(p, n)
        held[p] += n
        named = plans[(step // 50) % len(plans)]
        for asked in paths:
            root, _ = quotas.owner(asked, named)
            want = sum(v for c, v in held.items() if root == "/" or c == root or c.startswith(root + "/"))
            assert tally.under(root, named) == want, (step, asked, root)
