"""Bad input on a real master: a 4xx whose message names the field, and nothing changed."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.service.live import host_state, start_agent, start_master, wait_until
from tests.service.test_scope import snapshot

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
  - {name: gpu, select: "select(gpu)"}
consumers:
  - {path: /A}
  - {path: /B, resource_groups: [gpu]}
  - {path: /P}
  - {path: /P/leaf}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    m = start_master(tmp / "m", PLAN)
    agent = start_agent(m, "h1", tmp / "h1", slots=2, extra=["--light"])
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            client = c.post("/v1/clients", json={"name": "appA", "consumer": "/"}).json()["id"]
            aid = c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 1}).json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 20, "granted")
        yield m, client, aid
    finally:
        agent.kill()
        m.proc.kill()


def text_of(r: httpx.Response) -> str:
    return json.dumps(r.json()["detail"])


CASES = [
    # (name, method, path, body (dict, or raw bytes), status, words the message must hold)
    ("malformed JSON", "POST", "/v1/allocations", b'{"client": 1, "consumer": ', 422, ["json"]),
    ("not an object", "POST", "/v1/allocations", b'[1, 2]', 422, ["body"]),
    ("unknown consumer", "POST", "/v1/allocations", {"consumer": "/Nobody", "max": 1}, 422, ["consumer", "/Nobody"]),
    ("a parent consumer", "POST", "/v1/allocations", {"consumer": "/P", "max": 1}, 422, ["consumer", "leaf"]),
    ("unknown group", "POST", "/v1/allocations", {"consumer": "/A", "group": "nope", "max": 1}, 422, ["group", "nope"]),
    ("a group not planned", "POST", "/v1/allocations", {"consumer": "/B", "group": "all", "max": 1}, 422,
     ["group", "all"]),
    ("min > max", "POST", "/v1/allocations", {"consumer": "/A", "min": 3, "max": 2}, 422, ["min"]),
    ("negative max", "POST", "/v1/allocations", {"consumer": "/A", "max": -1}, 422, ["max"]),
    ("zero slots per instance", "POST", "/v1/allocations", {"consumer": "/A", "max": 1, "slots_per_instance": 0},
     422, ["slots_per_instance"]),
    ("select() that does not parse", "POST", "/v1/allocations",
     {"consumer": "/A", "max": 1, "requirement": "select(mem >"}, 422, ["requirement"]),
    ("an unknown field", "POST", "/v1/allocations", {"consumer": "/A", "max": 1, "maxx": 2}, 422, ["maxx"]),
    ("unknown client", "POST", "/v1/allocations", {"client": 999, "consumer": "/A", "max": 1}, 422, ["client"]),
    ("oversized body", "POST", "/v1/allocations", b'{"pad": "' + b"x" * (2 << 20) + b'"}', 413, ["body"]),
    ("PATCH min > max", "PATCH", "/v1/allocations/{aid}", {"min": 5}, 422, ["min"]),
    ("PATCH negative", "PATCH", "/v1/allocations/{aid}", {"max": -4}, 422, ["max"]),
    ("release an unknown host", "POST", "/v1/allocations/{aid}/release", {"hosts": ["nohost"]}, 422, ["hosts"]),
    ("activity: negative slots", "POST", "/v1/allocations/{aid}/activities",
     {"host": "h1", "argv": ["true"], "slots": -1}, 422, ["slots"]),
    ("activity: more slots than held", "POST", "/v1/allocations/{aid}/activities",
     {"host": "h1", "argv": ["true"], "slots": 2}, 422, ["slots"]),
    ("activity: empty argv", "POST", "/v1/allocations/{aid}/activities", {"host": "h1", "argv": []}, 422, ["argv"]),
    ("activity: a host not held", "POST", "/v1/allocations/{aid}/activities", {"host": "h9", "argv": ["true"]},
     422, ["host"]),
    ("client under an unknown consumer", "POST", "/v1/clients", {"name": "x", "consumer": "/Nobody"}, 422,
     ["consumer"]),
    ("token: consumer without a path", "POST", "/v1/tokens", {"kind": "consumer"}, 422, ["consumer"]),
    ("token: unknown kind", "POST", "/v1/tokens", {"kind": "root"}, 422, ["kind"]),
    ("no such allocation", "GET", "/v1/allocations/424242", None, 404, ["424242"]),
    ("an id that is not a number", "GET", "/v1/allocations/abc", None, 422, ["id"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(world, case):
    m, client, aid = world
    _, method, path, body, status, words = case
    path = path.format(aid=aid)
    if isinstance(body, dict) and path == "/v1/allocations":
        body = {"client": client, **body}
    before = snapshot(m)
    headers = {"Authorization": f"Bearer {m.token}"}
    if isinstance(body, bytes):
        r = httpx.request(method, m.url + path, content=body, headers={**headers, "content-type": "application/json"},
                          timeout=30)
    else:
        r = httpx.request(method, m.url + path, json=body, headers=headers, timeout=30)
    assert r.status_code == status, r.text
    message = text_of(r).lower()
    for w in words:
        assert w.lower() in message, f"{w!r} not named in {message}"
    assert snapshot(m) == before


def test_a_rejected_plan_leaves_the_old_one_in_force(world):
    m, _, aid = world
    bad = PLAN + "  - {path: /C, share_ratio: -2}\n  - {path: /D, resource_groups: [nope]}\n"
    before = snapshot(m)
    with m.http() as c:
        old = c.get("/v1/plan").json()
        r = c.put("/v1/plan", content=bad, headers={"content-type": "text/plain"})
        assert r.status_code == 422
        problems = r.json()["detail"]
        assert len(problems) >= 2
        assert any("share_ratio" in ".".join(map(str, p["loc"])) for p in problems) and all(p["line"] for p in problems)
        assert c.get("/v1/plan").json() == old
        r = c.put("/v1/plan", content="consumers: [", headers={"content-type": "text/plain"})
        assert r.status_code == 422 and c.get("/v1/plan").json() == old
    assert snapshot(m) == before


def test_a_good_plan_is_versioned_with_who_applied_it(world):
    m, _, aid = world
    with m.http() as c:
        v = c.get("/v1/plan").json()["version"]
        r = c.put("/v1/plan", content=PLAN + "  - {path: /C}\n", headers={"content-type": "text/plain"})
        assert r.status_code == 200, r.text
        assert r.json()["version"] == v + 1
        now = c.get("/v1/plan").json()
        assert now["version"] == v + 1 and now["applied_by"] == "admin" and "/C" in now["text"]
        # the running allocation carried over
        assert c.get(f"/v1/allocations/{aid}").json()["held"] == 1
        assert any(x["consumer"] == "/C" for x in c.get("/v1/consumers").json()["consumers"])



def test_release_some_slots_of_a_host(world):
    m, client, _ = world
    with m.http() as c:
        aid = c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 1}).json()["id"]
        wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 20, "granted")
        r = c.post(f"/v1/allocations/{aid}/release", json={"slots": {"h1": 2}})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "slots"]
        r = c.post(f"/v1/allocations/{aid}/release", json={"slots": {"h1": 1}, "blocked": True})
        assert r.status_code == 200, r.text
        after = r.json()
        assert after["held"] == 0 and after["max"] == 1 and after["blocked"] == ["h1"]
        c.delete(f"/v1/allocations/{aid}")
