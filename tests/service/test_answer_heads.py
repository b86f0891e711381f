"""Every kind of answer's head reaches the client when it is ready: one with no body (HEAD), a
JSON one on a kept-alive connection, and an event stream's before its first event (a client
waits for its stream to open; holding the head for a body's first part kept it waiting until
an event came). A real master on loopback."""

from __future__ import annotations

import httpx
import pytest

from tests.service.live import start_master

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    m = start_master(tmp_path_factory.mktemp("heads") / "m", PLAN)
    try:
        yield m
    finally:
        m.proc.kill()


def test_heads_go_out_with_or_without_a_body(master):
    with httpx.Client(base_url=master.url, timeout=30) as c:
        for _ in range(3):
            r = c.head("/healthz")
            assert r.status_code in (200, 405) and r.content == b""
            assert int(r.headers["content-length"]) > 0 and "x-request-id" in r.headers
            g = c.get("/healthz")
            assert g.status_code == 200 and g.json()["status"] == "ok"
            assert int(g.headers["content-length"]) == len(g.content)


def test_an_event_stream_opens_before_its_first_event(master):
    with master.http() as c:
        cid = c.post("/v1/clients", json={"name": "s", "consumer": "/A"}).json()["id"]
        # no event is due (no host: nothing is granted); the head must come all the same
        with c.stream("GET", f"/v1/clients/{cid}/events", headers={"Accept": "text/event-stream"},
                      timeout=10) as s:
            assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
