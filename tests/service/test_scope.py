"""Every endpoint against every token kind, on a real master: outside its scope a token
gets 403 (no token: 401), and nothing changes."""

from __future__ import annotations


import httpx
import pytest

from tests.service.live import SLEEPER, host_state, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
  - {path: /A/x}
  - {path: /B}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scope")
    m = start_master(tmp / "m", PLAN)
    agent = start_agent(m, "h1", tmp / "h1", slots=2, extra=["--light"])
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            tok = {k: c.post("/v1/tokens", json=body).json()["token"] for k, body in {
                "consumer A": {"kind": "consumer", "consumer": "/A"},
                "consumer B": {"kind": "consumer", "consumer": "/B"},
                "agent h1": {"kind": "agent", "host": "h1"},
                "agent h2": {"kind": "agent", "host": "h2"},
            }.items()}
            tok["admin"] = m.token
        with m.http(tok["consumer A"]) as c:
            client = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
            aid = c.post("/v1/allocations", json={"client": client, "consumer": "/A/x", "max": 1}).json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 20, "granted")
            act = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": SLEEPER}).json()["id"]
            wait_until(lambda: c.get(f"/v1/activities/{act}").json()["state"] == "running", 20, "running")
        yield m, tok, {"client": client, "aid": aid, "act": act}
    finally:
        agent.kill()
        m.proc.kill()


def endpoints(ids: dict) -> list[tuple[str, str, dict | str | None, set[str]]]:
    """(method, path, body, token kinds allowed). Everything belongs to /A or to host h1."""
    c, a, act = ids["client"], ids["aid"], ids["act"]
    alloc = {"client": c, "consumer": "/A/x", "max": 1}
    owner = {"admin", "consumer A"}
    return [
        ("POST", "/v1/clients", {"name": "another", "consumer": "/A"}, owner),
        ("GET", f"/v1/clients/{c}", None, owner),
        ("GET", f"/v1/clients/{c}/events?after=0&wait=0", None, owner),
        ("POST", "/v1/allocations", alloc, owner),
        ("GET", f"/v1/allocations/{a}", None, owner),
        ("PATCH", f"/v1/allocations/{a}", {"max": 2}, owner),
        ("POST", f"/v1/allocations/{a}/release", {"hosts": ["h1"]}, owner),
        ("POST", f"/v1/allocations/{a}/activities", {"host": "h1", "argv": ["true"]}, owner),
        ("DELETE", f"/v1/allocations/{a}", None, owner),
        ("GET", f"/v1/activities/{act}", None, owner),
        ("GET", f"/v1/activities/{act}/output", None, owner),
        ("POST", f"/v1/activities/{act}/kill", None, owner),
        ("GET", "/v1/allocations", None, owner | {"consumer B"}),
        ("GET", "/v1/activities", None, owner | {"consumer B"}),
        ("GET", "/v1/hosts", None, owner | {"consumer B"}),
        ("GET", "/v1/consumers", None, owner | {"consumer B"}),
        ("POST", "/v1/hosts/h1/close", {"reclaim": True}, {"admin"}),
        ("POST", "/v1/hosts/h1/open", None, {"admin"}),
        ("GET", "/v1/plan", None, {"admin"}),
        ("PUT", "/v1/plan", PLAN + "  - {path: /C}\n", {"admin"}),
        ("POST", "/v1/plan/diff", PLAN, {"admin"}),
        ("POST", "/v1/tokens", {"kind": "admin"}, {"admin"}),
        ("GET", "/v1/tokens", None, {"admin"}),
        ("DELETE", "/v1/tokens/1", None, {"admin"}),
        ("POST", "/v1/agents/h1/register", {"slots": 9}, {"admin", "agent h1"}),
        ("POST", "/v1/agents/h1/heartbeat", {"activities": [{"id": act, "state": "exited", "exit_code": 1}]},
         {"admin", "agent h1"}),
        ("GET", "/metrics", None, {"admin"}),
    ]


def snapshot(m) -> dict:
    with m.http() as c:
        return {"allocations": c.get("/v1/allocations").json(), "activities": c.get("/v1/activities").json(),
                "hosts": [{k: v for k, v in h.items() if k != "last_seen"} for h in c.get("/v1/hosts").json()["hosts"]],
                "plan": c.get("/v1/plan").json()["version"]}


def call(m, token: str | None, method: str, path: str, body) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    kw = {"content": body, "headers": {**headers, "content-type": "text/plain"}} if isinstance(body, str) else \
        {"json": body, "headers": headers} if body is not None else {"headers": headers}
    return httpx.request(method, m.url + path, timeout=30, **kw)


KINDS = ["admin", "consumer A", "consumer B", "agent h1", "agent h2"]


def test_every_endpoint_refuses_outside_its_scope(world):
    m, tok, ids = world
    table = endpoints(ids)
    refused = 0
    for method, path, body, allowed in table:
        for kind in KINDS:
            if kind in allowed:
                continue
            before = snapshot(m)
            r = call(m, tok[kind], method, path, body)
            assert r.status_code == 403, f"{kind} {method} {path}: {r.status_code} {r.text}"
            assert "detail" in r.json()
            assert snapshot(m) == before, f"{kind} {method} {path} changed the store"
            refused += 1
        before = snapshot(m)
        r = call(m, None, method, path, body)
        assert r.status_code == 401, f"no token {method} {path}: {r.status_code}"
        r = call(m, "apt_not-a-token", method, path, body)
        assert r.status_code == 401
        assert snapshot(m) == before
    assert refused >= 60


def test_a_consumer_lists_only_its_subtree(world):
    m, tok, ids = world
    with m.http(tok["consumer B"]) as c:
        assert c.get("/v1/allocations").json() == {"allocations": []}
        assert c.get("/v1/activities").json() == {"activities": []}
        assert {x["consumer"] for x in c.get("/v1/consumers").json()["consumers"]} == {"/B"}
    with m.http(tok["consumer A"]) as c:
        assert [a["id"] for a in c.get("/v1/allocations").json()["allocations"]] == [ids["aid"]]
        assert {x["consumer"] for x in c.get("/v1/consumers").json()["consumers"]} == {"/A", "/A/x"}


def test_tokens_are_stored_hashed(world):
    m, tok, _ = world
    from sqlalchemy import create_engine, text

    with create_engine(m.db).connect() as c:
        stored = [r[0] for r in c.execute(text("SELECT digest FROM tokens"))]
    assert len(stored) >= 5
    for t in tok.values():
        assert t not in stored and all(t not in d for d in stored)


def test_a_revoked_token_is_refused_at_once(world):
    m, tok, ids = world
    with m.http() as c:
        made = c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/A"}).json()
        assert made["token"].startswith("apt_") and made["id"] >= 1
        with m.http(made["token"]) as mine:
            assert mine.get(f"/v1/allocations/{ids['aid']}").status_code == 200  # used, so cached
        listed = c.get("/v1/tokens").json()["tokens"]
        entry = next(t for t in listed if t["id"] == made["id"])
        assert (entry["kind"], entry["consumer"]) == ("consumer", "/A")
        assert all(made["token"] not in str(t) for t in listed) and all("digest" not in t for t in listed)
        assert c.delete(f"/v1/tokens/{made['id']}").status_code == 204
        assert c.delete(f"/v1/tokens/{made['id']}").status_code == 404
        with m.http(made["token"]) as mine:
            assert mine.get(f"/v1/allocations/{ids['aid']}").status_code == 401
