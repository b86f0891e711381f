"""Failover on PostgreSQL: two masters on one database elect a leader with an advisory
lock; the standby answers /healthz and 503 naming the leader; SIGKILL the leader and
the standby serves within 5 s, with every grant kept; agents and the SDK follow."""

from __future__ import annotations

import signal
import time

import httpx

from apportion.client import Client
from tests.service.live import start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
"""


def test_standby_takes_over_within_5_s(tmp_path, pg_url):
    m1 = start_master(tmp_path / "m1", PLAN, db=pg_url)
    m2 = start_master(tmp_path / "m2", PLAN, db=pg_url, token=m1.token, wait=False)
    agent = start_agent(f"{m1.url},{m2.url}", "h1", tmp_path / "h1", slots=2, token=m1.token)
    try:
        health = wait_until(lambda: (h := httpx.get(m2.url + "/healthz", timeout=2).json())["role"] == "standby"
                            and h["leader"] == m1.url and h, 30, "m2 a standby naming m1 as the leader")
        assert health["leader"] == m1.url
        r = httpx.get(m2.url + "/v1/hosts", headers={"Authorization": f"Bearer {m1.token}"}, timeout=5)
        assert r.status_code == 503 and r.json()["leader"] == m1.url

        with Client([m2.url, m1.url], token=m1.token) as api:  # the standby first: the SDK follows to m1
            wait_until(lambda: [h for h in api.hosts() if h["name"] == "h1" and h["state"] == "ok"], 20, "h1 up")
            me = api.register("appA", "/A")
            alloc = api.allocate("/A", "all", 0, 2, client=me)
            wait_until(lambda: api.allocation(alloc["id"])["held"] == 2, 20, "granted")

            m1.proc.kill(signal.SIGKILL)
            killed = time.monotonic()
            wait_until(lambda: httpx.get(m2.url + "/readyz", timeout=1).status_code == 200, 10, "m2 serving",
                       every=0.02)
            took = time.monotonic() - killed
            assert took <= 5.0, f"the standby took {took:.2f} s"
            assert httpx.get(m2.url + "/healthz").json()["role"] == "leader"

            # the grant survived; the SDK and the agent moved to the new leader by themselves
            assert api.allocation(alloc["id"])["hosts"] == {"h1": 2}
            wait_until(lambda: [h for h in api.hosts() if h["name"] == "h1" and h["state"] == "ok"], 20,
                       "h1 heartbeating to m2")
            granted = [e for e in api.poll_events(me, after=0, wait=0) if e["type"] == "granted"]
            assert sum(e["slots"] for e in granted) == 2
    finally:
        agent.kill()
        m1.proc.kill()
        m2.proc.kill()
