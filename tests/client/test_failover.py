"""The SDK across a failover: two masters on one PostgreSQL database, the leader SIGKILLed.

The client is given both URLs, standby first: it follows the standby's 503 to
the leader, and when the leader dies it keeps going round the URLs until the
standby has taken over. Its event stream resumes there, with no event lost and
none twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apportion.client import Client
from tests.service.live import postgres_url, start_agent, start_master, wait_until

ROOT = Path(__file__).resolve().parents[2]
PLAN = (ROOT / "examples" / "service" / "plan.yaml").read_text()


@pytest.fixture
def pg():
    yield from postgres_url()


def granted(stream, allocation: int, seen: list[dict]) -> dict:
    while True:
        event = stream.next(30)
        seen.append(event)
        if event["type"] == "granted" and event["allocation"] == allocation:
            return event


def test_the_client_follows_the_leader_and_its_events_resume_after_a_failover(tmp_path, pg):
    leader = start_master(tmp_path / "m1", PLAN, db=pg)
    standby = start_master(tmp_path / "m2", PLAN, db=pg, token=leader.token, wait=False)
    agent = None
    try:
        wait_until(lambda: _healthy(standby.url), 30, f"the standby up:\n{standby.proc.output()[-2000:]}")
        agent = start_agent(f"{standby.url},{leader.url}", "host1", tmp_path / "host1", slots=4, token=leader.token)
        with Client([standby.url, leader.url], token=leader.token, retry_for=30) as api:
            wait_until(lambda: [h for h in api.hosts() if h["state"] == "ok"], 20, "host1 reported")
            assert api.master == leader.url  # the standby named the leader
            me = api.register("failover", "/Apps/batch")
            first = api.allocate("/Apps/batch", "Workers", 0, 1)["id"]
            seen: list[dict] = []
            with api.events(me) as stream:
                granted(stream, first, seen)
                leader.proc.kill()  # SIGKILL: its connection drops and its lock goes
                second = api.allocate("/Apps/batch", "Workers", 0, 1)["id"]  # waits for the standby
                assert api.master == standby.url
                granted(stream, second, seen)
            ids = [e["id"] for e in seen]
            assert ids == sorted(set(ids))  # in order, none twice
            assert [e["id"] for e in api.poll_events(me, after=0, wait=0)][:len(ids)] == ids  # none lost
    finally:
        if agent is not None:
            agent.kill()
        leader.proc.kill()
        standby.proc.kill()


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
