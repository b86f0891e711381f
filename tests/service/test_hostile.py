"""A tenant and an attacker against a real master (issue 18, "Why"): each case here answered
500, was quietly widened, leaked another tenant's names, or grew the master without bound
on the old main. Now: a 4xx naming the field, nothing changed, a short answer."""

from __future__ import annotations

import json
import select
import socket
import time

import httpx
import psutil
import pytest

from tests.service.live import host_state, start_agent, start_master, wait_until
from tests.service.test_scope import snapshot

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
  - {path: /B}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    m = start_master(tmp / "m", PLAN)
    agent = start_agent(m, "h1", tmp / "h1", slots=2, extra=["--light"])
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            tok = {k: c.post("/v1/tokens", json={"kind": "consumer", "consumer": f"/{k}"}).json()["token"]
                   for k in ("A", "B")}
            tok["agent"] = c.post("/v1/tokens", json={"kind": "agent", "host": "h1"}).json()["token"]
        with m.http(tok["A"]) as c:
            client = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
            aid = c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 1}).json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 20, "granted")
        yield m, tok, client, aid
    finally:
        agent.kill()
        m.proc.kill()


def raw(m, method: str, path: str, body: bytes, token: str | None = None) -> httpx.Response:
    """``body`` sent as it is: Python's json module writes NaN and Infinity, as an attacker would."""
    headers = {"content-type": "application/json", "Authorization": f"Bearer {token or m.token}"}
    return httpx.request(method, m.url + path, content=body, headers=headers, timeout=30)


def refused(r: httpx.Response, status: int, field: str) -> str:
    """The answer is ``status``, in the API's error shape, and names ``field``; its text."""
    assert r.status_code == status, r.text[:2000]
    detail = r.json()["detail"]
    text = json.dumps(detail)
    assert field in text, f"{field!r} not named in {text[:1000]}"
    return text


ALLOC_CASES = [
    ("max NaN", '{"client": %(client)d, "consumer": "/A", "max": NaN}', "max"),
    ("max Infinity", '{"client": %(client)d, "consumer": "/A", "max": Infinity}', "max"),
    ("max -Infinity", '{"client": %(client)d, "consumer": "/A", "max": -Infinity}', "max"),
    ("max true", '{"client": %(client)d, "consumer": "/A", "max": true}', "max"),
    ("max \"3\"", '{"client": %(client)d, "consumer": "/A", "max": "3"}', "max"),
    ("max 2.0", '{"client": %(client)d, "consumer": "/A", "max": 2.0}', "max"),
    ("client true", '{"client": true, "consumer": "/A", "max": 1}', "client"),
    ("exclusive 1", '{"client": %(client)d, "consumer": "/A", "max": 1, "exclusive": 1}', "exclusive"),
    ("80 nested parentheses", '{"client": %(client)d, "consumer": "/A", "max": 1, "requirement": "'
     + "(" * 80 + "slots > 0" + ")" * 80 + '"}', "requirement"),
    ("300 negations", '{"client": %(client)d, "consumer": "/A", "max": 1, "requirement": "'
     + "!" * 300 + 'gpu"}', "requirement"),
]


@pytest.mark.parametrize("case", ALLOC_CASES, ids=[c[0] for c in ALLOC_CASES])
def test_an_allocation_with_a_wrong_number_is_a_422_naming_the_field(world, case):
    m, tok, client, _ = world
    _, body, field = case
    before = snapshot(m)
    r = raw(m, "POST", "/v1/allocations", (body % {"client": client}).encode(), tok["A"])
    refused(r, 422, field)
    assert len(r.content) < 2000
    assert snapshot(m) == before


def test_a_patch_with_nan_or_a_boolean_is_refused(world):
    m, tok, _, aid = world
    before = snapshot(m)
    for body in (b'{"max": NaN}', b'{"max": true}', b'{"min": "0"}', b'{"max": 1e400}'):
        refused(raw(m, "PATCH", f"/v1/allocations/{aid}", body, tok["A"]), 422, "m")
    assert snapshot(m) == before


@pytest.mark.parametrize("body", [b'{"slots": 2, "memory": Infinity}', b'{"slots": 2, "memory": NaN}',
                                  b'{"slots": true}', b'{"slots": "2"}', b'{"slots": 2, "attributes": {"x": NaN}}'])
def test_an_agent_report_with_a_number_that_is_not_one_is_refused(world, body):
    m, tok, _, _ = world
    before = snapshot(m)
    r = raw(m, "POST", "/v1/agents/h1/register", body, tok["agent"])
    text = refused(r, 422, "body")
    assert any(f in text for f in ("memory", "slots", "attributes"))
    assert snapshot(m) == before


@pytest.mark.parametrize("field,body", [
    ("argv", {"host": "h1", "argv": ["sh", "-c", "echo\x00hi"]}),
    ("env", {"host": "h1", "argv": ["true"], "env": {"X": "a\x00b"}}),
    ("env", {"host": "h1", "argv": ["true"], "env": {"X\x00": "a"}}),
    ("cwd", {"host": "h1", "argv": ["true"], "cwd": "/tmp\x00/x"}),
])
def test_a_nul_byte_for_a_process_is_refused(world, field, body):
    m, tok, _, aid = world
    before = snapshot(m)
    with m.http(tok["A"]) as c:
        refused(c.post(f"/v1/allocations/{aid}/activities", json=body), 422, field)
    assert snapshot(m) == before


@pytest.mark.parametrize("path,param", [("/v1/activities?hostname=h1", "hostname"),
                                        ("/v1/allocations?consumer=/A&colour=red", "colour"),
                                        ("/v1/hosts?state=down", "state"),
                                        ("/v1/clients/1/events?after=0&wait=0&since=4", "since")])
def test_an_unknown_query_parameter_is_a_422_naming_it(world, path, param):
    m, tok, _, _ = world
    with m.http(tok["A"]) as c:
        r = c.get(path)
    text = refused(r, 422, param)
    assert r.json()["detail"][0]["loc"][0] == "query", text


def test_a_known_query_parameter_still_works(world):
    m, tok, client, aid = world
    with m.http(tok["A"]) as c:
        assert c.get(f"/v1/allocations?client={client}").json()["allocations"][0]["id"] == aid
        assert c.get(f"/v1/clients/{client}/events?after=0&wait=0").status_code == 200


def test_an_error_echoes_only_an_excerpt(world):
    m, tok, client, _ = world
    big = "x" * 900_000
    with m.http(tok["A"]) as c:
        r = c.post("/v1/clients", json={"name": big, "consumer": "/A"})
        refused(r, 422, "name")
        assert len(r.content) < 2000
        r = c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 1,
                                            "requirement": "select(" + "a && " * 390 + "b"})
        refused(r, 422, "requirement")
        assert len(r.content) < 2000


@pytest.mark.parametrize("body", [b"[" * 200_000 + b"]" * 200_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000])
def test_deeply_nested_json_is_a_4xx(world, body):
    m, tok, _, _ = world
    r = raw(m, "POST", "/v1/allocations", body, tok["A"])
    assert 400 <= r.status_code < 500, r.text[:500]
    assert len(r.content) < 2000
    assert m.proc.alive


def test_every_answer_has_a_request_id(world):
    m, tok, _, _ = world
    seen = set()
    for path in ("/healthz", "/v1/hosts", "/v1/nothing-here"):
        r = httpx.get(m.url + path, headers={"Authorization": f"Bearer {tok['A']}"})
        assert r.headers.get("x-request-id")
        seen.add(r.headers["x-request-id"])
    assert len(seen) == 3


# --- quiet widening and leaks ---------------------------------------------------------------------
def test_an_admin_token_asked_with_a_consumer_is_refused(world):
    m, _, _, _ = world
    with m.http() as c:
        before = c.get("/v1/tokens").json()
        refused(c.post("/v1/tokens", json={"kind": "admin", "consumer": "/A"}), 422, "consumer")
        refused(c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/A", "host": "h1"}), 422, "host")
        refused(c.post("/v1/tokens", json={"kind": "agent", "host": "h1", "consumer": "/A"}), 422, "consumer")
        assert c.get("/v1/tokens").json() == before


def test_a_refusal_never_names_another_tenant(world):
    m, tok, client, aid = world
    with m.http(tok["B"]) as c:
        answers = [c.get(f"/v1/allocations/{aid}"), c.get(f"/v1/clients/{client}"),
                   c.patch(f"/v1/allocations/{aid}", json={"max": 2}),
                   c.post("/v1/allocations", json={"client": client, "consumer": "/B", "max": 1}),
                   c.post("/v1/clients", json={"name": "appA", "consumer": "/B"})]
    # a name is per consumer: B's "appA" is B's own client, and says nothing of A's
    assert [r.status_code for r in answers] == [403, 403, 403, 403, 201]
    assert answers[-1].json()["id"] != client
    for r in answers:
        assert "/A" not in r.text, r.text


# --- bodies -----------------------------------------------------------------------------------------
def chunked(m, path: str, total: int, token: str | None) -> tuple[int, bytes]:
    """POST ``total`` bytes of a JSON string in chunks (no Content-Length), stopping when the
    master answers; (status, the answer's first bytes). The stream is made as it goes."""
    s = socket.create_connection(("127.0.0.1", m.port), timeout=30)
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{m.port}", "Content-Type: application/json",
            "Transfer-Encoding: chunked"]
    if token:
        head.append(f"Authorization: Bearer {token}")
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    piece = b"x" * (1 << 16)
    frame = b"%x\r\n" % len(piece) + piece + b"\r\n"
    s.sendall(b'5\r\n{"a":\r\n')
    sent = 0
    got = b""
    try:
        while sent < total:
            readable, _, _ = select.select([s], [], [], 0)
            if readable:
                break
            s.sendall(frame)
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass
    s.settimeout(10)
    def whole(answer: bytes) -> bool:  # the head, and as much body as it announces
        head, sep, body = answer.partition(b"\r\n\r\n")
        if not sep:
            return False
        length = [int(x.split(b":", 1)[1]) for x in head.lower().split(b"\r\n") if x.startswith(b"content-length:")]
        return not length or len(body) >= length[0]

    try:
        while not whole(got):
            more = s.recv(65536)
            if not more:
                break
            got += more
    except (ConnectionResetError, TimeoutError):
        pass
    s.close()
    assert got.startswith(b"HTTP/1.1 "), f"no answer after {sent} bytes: {got[:200]!r}"
    return int(got.split()[1]), got[:2000]


@pytest.mark.parametrize("who", ["consumer", "nobody"])
def test_a_chunked_body_past_the_limit_is_a_413_and_memory_stays_bounded(world, who):
    m, tok, _, _ = world
    proc = psutil.Process(m.proc.popen.pid)
    before = proc.memory_info().rss
    started = time.monotonic()
    status, answer = chunked(m, "/v1/allocations", 300 << 20, tok["A"] if who == "consumer" else None)
    assert status == 413, answer
    assert b"limit" in answer
    assert time.monotonic() - started < 60
    assert proc.memory_info().rss - before < 50 << 20
    with m.http() as c:  # and it serves on
        assert c.get("/v1/hosts").status_code == 200


# --- a host whose starts keep failing ---------------------------------------------------------------
def test_a_host_whose_starts_fail_says_so_in_the_host_list(world):
    """Played as an agent would (its reports by hand): each start on the host fails, with the
    agent's reason; /v1/hosts counts them in a row and in all, and a start that runs resets the row."""
    m, tok, client, _ = world
    with m.http() as c:
        assert c.post("/v1/agents/hbad/register", json={"slots": 2}).status_code == 200

        def beat(reports: list[dict]) -> dict:
            r = c.post("/v1/agents/hbad/heartbeat", json={"activities": reports})
            assert r.status_code == 200, r.text
            return r.json()

        aid = c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 1,
                                              "requirement": "select(name == hbad)"}).json()["id"]
        wait_until(lambda: beat([]) and c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 20, "granted on hbad")

        def row() -> dict:
            return next(h for h in c.get("/v1/hosts").json()["hosts"] if h["name"] == "hbad")

        for i in (1, 2):
            act = c.post(f"/v1/allocations/{aid}/activities", json={"host": "hbad", "argv": ["nope"]}).json()["id"]
            beat([{"id": act, "state": "failed", "reason": f"nope: no such program ({i})"}])
            assert c.get(f"/v1/activities/{act}").json()["state"] == "failed"
        h = row()
        assert (h["start_failures"], h["start_failures_total"]) == (2, 2)
        assert h["last_start_failure"] == "nope: no such program (2)"
        m.restart()  # rebuilt from the stored activities: a restart does not hide a broken host
        wait_until(lambda: (h := row()) and (h["start_failures"], h["start_failures_total"]) == (2, 2)
                   and h["last_start_failure"] == "nope: no such program (2)", 20, "the counts after a restart")
        act = c.post(f"/v1/allocations/{aid}/activities", json={"host": "hbad", "argv": ["true"]}).json()["id"]
        beat([{"id": act, "state": "running", "pid": 4242}])
        h = row()
        assert (h["start_failures"], h["start_failures_total"]) == (0, 2)
        c.delete(f"/v1/allocations/{aid}")
