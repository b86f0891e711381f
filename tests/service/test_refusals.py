"""Calls refused before authentication cost nothing durable: no audit row each (3,000 anonymous
POSTs wrote 3,000 rows), a count in the metrics and a summed-up log line; past a limit per
address, 429 with Retry-After, while the valid tokens of the same address go on."""

from __future__ import annotations

import re
import sqlite3
import time

import httpx
import pytest

from tests.service.live import start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
"""
WRITES = [("POST", "/v1/clients", {"name": "x", "consumer": "/A"}),
          ("POST", "/v1/allocations", {"client": 1, "consumer": "/A", "max": 1}),
          ("POST", "/v1/tokens", {"kind": "admin"}),
          ("POST", "/v1/hosts/h1/close", None),
          ("DELETE", "/v1/allocations/1", None)]


def audit_rows(m) -> int:
    with sqlite3.connect(m.db.removeprefix("sqlite:///")) as db:
        return db.execute("SELECT count(*) FROM audit").fetchone()[0]


def metric(m, name: str) -> dict[str, float]:
    """``{labels: value}`` of one metric, from the master's /metrics."""
    with m.http() as c:
        text = c.get("/metrics").text
    return {labels: float(v) for labels, v in re.findall(rf"^{name}{{(.*?)}} (\S+)$", text, re.M)}


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    m = start_master(tmp_path_factory.mktemp("refusals") / "m", PLAN)  # the default limits
    yield m
    m.proc.kill()


def test_three_thousand_anonymous_writes_add_no_audit_row(master):
    m = master
    with m.http() as c:
        c.post("/v1/clients", json={"name": "known", "consumer": "/A"})  # an admin's write: audited
    before = audit_rows(m)
    assert before >= 1
    started = time.monotonic()
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=m.url, timeout=30) as anon:
        for i in range(3000):
            method, path, body = WRITES[i % len(WRITES)]
            headers = {"Authorization": "Bearer apt_not-a-token"} if i % 2 else {}
            s = anon.request(method, path, json=body, headers=headers).status_code
            statuses[s] = statuses.get(s, 0) + 1
    elapsed = time.monotonic() - started
    # the first 100 (the default limit) are 401, the rest 429: none is a row
    assert statuses == {401: 100, 429: 2900}, statuses
    assert audit_rows(m) == before
    counted = metric(m, "apportion_unauthenticated_refusals_total")
    assert counted == {'status="401"': 100.0, 'status="429"': 2900.0}, counted
    with m.http() as c:
        assert re.search(r"^apportion_refusal_limited_addresses 1\.0$", c.get("/metrics").text, re.M)

    # the log: the first refusal at once, then one summary line at most every 10 s
    def lines() -> list[str]:
        return [x for x in m.proc.output().splitlines() if "refused before authentication" in x
                and '"apportion.server"' in x]
    first = wait_until(lines, 10, "the refusals in the log")
    assert "POST /v1/clients answered 401 from 127.0.0.1" in first[0], first
    assert len(lines()) <= 2 + elapsed / 10, lines()
    wait_until(lambda: any("more from 1 address(es)" in x for x in lines()), 15, "the summary line")


def test_an_admin_token_still_works_from_a_limited_address(master):
    m = master
    # this address is over its limit (the test above): a call without a token is a 429
    r = httpx.post(m.url + "/v1/clients", json={"name": "x", "consumer": "/A"})
    if r.status_code != 429:  # run alone: put the address over its limit first
        for _ in range(100):
            httpx.get(m.url + "/v1/hosts")
        r = httpx.post(m.url + "/v1/clients", json={"name": "x", "consumer": "/A"})
    assert r.status_code == 429
    assert 1 <= int(r.headers["retry-after"]) <= 60
    with m.http() as c:
        assert c.post("/v1/clients", json={"name": "still-served", "consumer": "/A"}).status_code == 201
        assert c.get("/v1/hosts").status_code == 200
    assert httpx.get(m.url + "/healthz").status_code == 200  # open paths are not limited


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    m = start_master(tmp_path_factory.mktemp("strict") / "m", PLAN,
                     extra=["--refusal-limit", "5", "--refusal-window", "30"])
    yield m
    m.proc.kill()


def test_the_limit_and_its_window_are_settable(strict):
    # (the window's end is in test_the_limiter_counts_per_address_in_fixed_windows, on a clock of its own)
    m = strict
    got = [httpx.post(m.url + "/v1/clients", json={"name": "x", "consumer": "/A"}) for _ in range(7)]
    assert [r.status_code for r in got] == [401] * 5 + [429] * 2
    assert 1 <= int(got[-1].headers["retry-after"]) <= 30
    assert "refused before authentication" in got[-1].json()["detail"]
    bogus = httpx.get(m.url + "/v1/hosts", headers={"Authorization": "Bearer apt_not-a-token"})
    assert bogus.status_code == 429  # an unknown token is no token
    with m.http() as c:
        assert c.get("/v1/hosts").status_code == 200
        counted = c.get("/metrics").text
    assert 'apportion_unauthenticated_refusals_total{status="429"} 3.0' in counted


def test_no_limit_with_zero(tmp_path):
    m = start_master(tmp_path / "m", PLAN, extra=["--refusal-limit", "0"])
    try:
        with httpx.Client(base_url=m.url, timeout=30) as anon:
            assert {anon.get("/v1/hosts").status_code for _ in range(150)} == {401}
    finally:
        m.proc.kill()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_limiter_counts_per_address_in_fixed_windows():
    from apportion.service.throttle import Limiter

    clock = Clock()
    lim = Limiter(3, 10.0, clock=clock)
    for _ in range(2):
        lim.refused("a")
    assert lim.retry_after("a") is None  # within its limit
    lim.refused("a")
    clock.now += 4.2
    assert lim.retry_after("a") == 6 and lim.retry_after("b") is None and lim.over() == 1
    clock.now += 5.8  # the window ends: a fresh count
    assert lim.retry_after("a") is None and lim.over() == 0
    lim.refused("a")
    assert lim.retry_after("a") is None
    assert Limiter(0).retry_after("a") is None  # 0: no limit


def test_the_limiter_follows_a_bounded_number_of_addresses(monkeypatch):
    from apportion.service import throttle

    monkeypatch.setattr(throttle, "MAX_ADDRESSES", 100)
    clock = Clock()
    lim = throttle.Limiter(1, 60.0, clock=clock)
    for i in range(1000):  # an attacker with many addresses
        lim.refused(f"10.0.{i // 256}.{i % 256}")
    assert len(lim.windows) <= 100
    assert lim.retry_after("10.0.3.231") == 60  # the newest are kept
