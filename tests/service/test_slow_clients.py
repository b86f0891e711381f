"""Slow and surplus connections against a real master, with real sockets: a request head that
trickles in a header line a second is answered 408 and closed; so is a body slower than the
floor rate (a slow body above it is served); a head too large is a 431; connections past the
bound are answered 503 and closed. On the old main the trickling connections stayed open for
as long as the client liked."""

from __future__ import annotations

import re
import selectors
import socket
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
HEAD_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    m = start_master(tmp_path_factory.mktemp("slow") / "m", PLAN,
                     extra=["--head-timeout", str(HEAD_TIMEOUT), "--body-timeout", "2", "--body-min-rate", "1000"])
    yield m
    m.proc.kill()


def _whole_answer(sock: socket.socket) -> bytes:
    """One answer read whole: its head, then its body by content-length."""
    got = b""
    while b"\r\n\r\n" not in got:
        part = sock.recv(65536)
        assert part, got
        got += part
    head, _, body = got.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1))
    while len(body) < length:
        part = sock.recv(65536)
        assert part, got
        body += part
    return head + b"\r\n\r\n" + body


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setblocking(False)
        self.opened = time.monotonic()
        self.got = b""
        self.closed_after: float | None = None

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            pass  # closed by the master: the read says so

    def read(self) -> None:
        try:
            while data := self.sock.recv(65536):
                self.got += data
        except BlockingIOError:
            return
        except ConnectionResetError:
            pass
        if self.closed_after is None:
            self.closed_after = time.monotonic() - self.opened
        self.sock.close()


def trickle(conns: list[Conn], line: bytes, until: float) -> None:
    """Send ``line`` on every open connection once a second (the attack), reading what comes
    back, until every connection is closed or ``until`` seconds have passed."""
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
    deadline = time.monotonic() + until
    next_line = time.monotonic() + 1
    while any(c.closed_after is None for c in conns) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0.0, next_line - time.monotonic())):
            key.data.read()
            if key.data.closed_after is not None:
                sel.unregister(key.fileobj)
        if time.monotonic() >= next_line:
            for c in conns:
                if c.closed_after is None:
                    c.send(line)
            next_line += 1
    sel.close()


def closed(m, reason: str) -> float:
    with m.http() as c:
        found = re.search(rf'^apportion_connections_closed_total{{reason="{reason}"}} (\S+)$', c.get("/metrics").text,
                          re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.timeout(120)
def test_two_hundred_trickling_heads_are_answered_408_and_closed(master):
    m = master
    conns = [Conn(m.port) for _ in range(200)]
    for c in conns:
        c.send(b"POST /v1/clients HTTP/1.1\r\nHost: master\r\n")
    # the master answers others meanwhile
    with m.http() as c:
        assert c.get("/v1/hosts").status_code == 200
    trickle(conns, b"X-Slow: one line a second\r\n", until=30)
    still = [c for c in conns if c.closed_after is None]
    for c in conns:
        c.sock.close()
    assert not still, f"{len(still)} of 200 trickling connections still open after 30 s"
    for c in conns:
        assert c.got.startswith(b"HTTP/1.1 408 "), c.got[:200]
        assert b"did not come whole within 2 s" in c.got
        assert c.closed_after >= HEAD_TIMEOUT - 0.2, c.closed_after  # not before its time
    assert closed(m, "head_timeout") >= 200


@pytest.mark.timeout(60)
def test_a_kept_alive_connection_that_trickles_its_next_head_is_closed(master):
    c = Conn(master.port)
    c.sock.setblocking(True)
    c.sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: master\r\n\r\n")
    first = _whole_answer(c.sock)  # its head and body may come in two reads
    assert first.startswith(b"HTTP/1.1 200 "), first
    c.sock.setblocking(False)
    c.opened = time.monotonic()
    c.send(b"GET /healthz HTTP/1.1\r\n")
    trickle([c], b"X-Slow: 1\r\n", until=20)
    assert c.closed_after is not None and c.got.startswith(b"HTTP/1.1 408 "), c.got


@pytest.mark.timeout(60)
def test_a_body_below_the_floor_rate_is_closed_and_one_above_it_is_served(master):
    m = master
    slow = Conn(m.port)
    slow.send(b"POST /v1/clients HTTP/1.1\r\nHost: master\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + m.token.encode() + b"\r\nContent-Length: 100000\r\n\r\n{")
    trickle([slow], b" " * 10, until=20)  # 10 bytes a second, the floor is 1000
    assert slow.closed_after is not None, "a body at 10 bytes/s still read after 20 s"
    assert slow.got.startswith(b"HTTP/1.1 408 ") and b"slower than 1000 bytes/s" in slow.got, slow.got
    assert closed(m, "body_too_slow") >= 1
    # 15,000 bytes at about 5,000 a second: longer than --body-timeout, faster than the floor
    body = b'{"name": "slow-but-fine", "consumer": "/A"}'.ljust(15000)
    with socket.create_connection(("127.0.0.1", m.port), timeout=30) as s:
        s.sendall(b"POST /v1/clients HTTP/1.1\r\nHost: master\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + m.token.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body))
        for i in range(0, len(body), 500):
            s.sendall(body[i:i + 500])
            time.sleep(0.1)  # the client's pace
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201 "), answer


def test_a_head_too_large_is_a_431(master):
    with socket.create_connection(("127.0.0.1", master.port), timeout=30) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: master\r\n" + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n")
        answer = b""
        while data := s.recv(65536):
            answer += data
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    # a small head with a large body, in one write, is no large head
    with master.http() as c:
        big = c.post("/v1/clients", content=b'{"name": "big-body", "consumer": "/A"}'.ljust(500_000),
                     headers={"content-type": "application/json"})
    assert big.status_code == 201, big.text


@pytest.mark.timeout(120)
def test_connections_past_the_bound_are_answered_503_and_closed(tmp_path):
    m = start_master(tmp_path / "m", PLAN, extra=["--max-connections", "30", "--head-timeout", "60"])
    conns: list[socket.socket] = []
    try:
        conns = [socket.create_connection(("127.0.0.1", m.port), timeout=30) for _ in range(30)]
        with m.http() as c:  # the connection a client opens now is one too many
            r = c.get("/v1/hosts")
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert "more than 30 connections" in r.json()["detail"]
        extra = socket.create_connection(("127.0.0.1", m.port), timeout=30)
        answer = b""
        while data := extra.recv(65536):
            answer += data
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        for s in conns[:5]:
            s.close()
        conns = conns[5:]

        def served() -> bool:
            with m.http() as c:
                return c.get("/v1/hosts").status_code == 200
        wait_until(served, 20, "a connection served once others closed")
        with m.http() as c:
            assert re.search(r'^apportion_connections_closed_total\{reason="too_many"\} [2-9]', c.get("/metrics").text,
                             re.M)
    finally:
        for s in conns:
            s.close()
        m.proc.kill()


def test_the_master_raises_its_open_files_limit_for_its_connections():
    # systemd leaves a service 1024 open files; the master raises its soft limit within the hard one
    import resource
    import subprocess
    import sys

    code = ("import resource\nfrom apportion.service import connguard\n"
            "connguard.raise_open_files_limit()\n"
            "print(*resource.getrlimit(resource.RLIMIT_NOFILE), connguard.default_max_connections())")

    def run(soft: int, hard: int) -> list[int]:
        def lower() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                             preexec_fn=lower).stdout
        return [int(x) for x in out.split()]

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # a hard limit can only be lowered here
    if hard == resource.RLIM_INFINITY or hard >= 4096 + 128:
        assert run(1024, hard) == [4096 + 128, hard, 4096]
    assert run(1024, 2048) == [2048, 2048, 2048 - 128]
    assert run(1024, 1024) == [1024, 1024, 1024 - 128]  # kept, and fewer connections than descriptors
