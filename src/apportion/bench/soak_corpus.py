"""Hostile requests for the soak (bench/soak.py): each must be refused with a 4xx, never a 5xx
and never accepted: NaN and Infinity, wrong types, deep nesting, NUL bytes, oversized and
chunked bodies, tokens out of scope, and more."""

from __future__ import annotations

import select
import socket
from typing import Any

JSON = {"content-type": "application/json"}


def _raw(body: str | bytes) -> dict[str, Any]:
    return {"content": body.encode() if isinstance(body, str) else body, "headers": dict(JSON)}


def cases() -> list[tuple[str, str, str, dict[str, Any], str | None]]:
    """(name, method, path, httpx keyword arguments, token: "admin" or None)."""
    deep = "(" * 80 + "slots > 0" + ")" * 80
    alloc = '{"client": 1, "consumer": "/T0", "max": %s}'
    out: list[tuple[str, str, str, dict[str, Any], str | None]] = [
        ("max NaN", "POST", "/v1/allocations", _raw(alloc % "NaN"), "admin"),
        ("max Infinity", "POST", "/v1/allocations", _raw(alloc % "Infinity"), "admin"),
        ("max -Infinity", "POST", "/v1/allocations", _raw(alloc % "-Infinity"), "admin"),
        ("max true", "POST", "/v1/allocations", _raw(alloc % "true"), "admin"),
        ("max string", "POST", "/v1/allocations", _raw(alloc % '"3"'), "admin"),
        ("max 1e400", "POST", "/v1/allocations", _raw(alloc % "1e400"), "admin"),
        ("max huge", "POST", "/v1/allocations", _raw(alloc % "1" + "0" * 40), "admin"),
        ("nested requirement", "POST", "/v1/allocations",
         {"json": {"client": 1, "consumer": "/T0", "max": 1, "requirement": deep}}, "admin"),
        ("negations", "POST", "/v1/allocations",
         {"json": {"client": 1, "consumer": "/T0", "max": 1, "requirement": "!" * 500 + "a"}}, "admin"),
        ("register inf memory", "POST", "/v1/agents/evil/register", _raw('{"slots": 2, "memory": Infinity}'),
         "admin"),
        ("register NaN memory", "POST", "/v1/agents/evil/register", _raw('{"slots": 2, "memory": NaN}'), "admin"),
        ("register slots true", "POST", "/v1/agents/evil/register", _raw('{"slots": true}'), "admin"),
        ("heartbeat unknown host", "POST", "/v1/agents/nobody-here/heartbeat", {"json": {"activities": []}},
         "admin"),
        ("NUL in argv", "POST", "/v1/allocations/1/activities", {"json": {"host": "real0", "argv": ["a\x00b"]}},
         "admin"),
        ("NUL in env", "POST", "/v1/allocations/1/activities",
         {"json": {"host": "real0", "argv": ["true"], "env": {"A": "\x00"}}}, "admin"),
        ("NUL in cwd", "POST", "/v1/allocations/1/activities",
         {"json": {"host": "real0", "argv": ["true"], "cwd": "/\x00"}}, "admin"),
        ("unknown query", "GET", "/v1/hosts?state=down", {}, "admin"),
        ("unknown query 2", "GET", "/v1/allocations?owner=me", {}, "admin"),
        ("admin token with a consumer", "POST", "/v1/tokens", {"json": {"kind": "admin", "consumer": "/T0"}},
         "admin"),
        ("agent token with a consumer", "POST", "/v1/tokens",
         {"json": {"kind": "agent", "host": "x", "consumer": "/T0"}}, "admin"),
        ("a big name", "POST", "/v1/clients", {"json": {"name": "x" * 900_000, "consumer": "/T0"}}, "admin"),
        ("deep JSON array", "POST", "/v1/allocations", _raw(b"[" * 100_000 + b"]" * 100_000), "admin"),
        ("deep JSON object", "POST", "/v1/allocations", _raw(b'{"a":' * 50_000 + b"1" + b"}" * 50_000), "admin"),
        ("not JSON", "POST", "/v1/allocations", _raw(b"\xff\xfe{"), "admin"),
        ("not UTF-8 plan", "PUT", "/v1/plan", {"content": b"\xff\xfe", "headers": {"content-type": "text/plain"}},
         "admin"),
        ("a plan that does not parse", "PUT", "/v1/plan",
         {"content": "consumers: [", "headers": {"content-type": "text/plain"}}, "admin"),
        ("no token", "POST", "/v1/allocations", {"json": {"client": 1, "consumer": "/T0", "max": 1}}, None),
        ("a bad token", "POST", "/v1/clients",
         {"json": {"name": "x", "consumer": "/T0"}, "headers": {"Authorization": "Bearer apt_nope"}}, None),
        ("an unknown field", "POST", "/v1/clients", {"json": {"name": "x", "consumer": "/T0", "admin": True}},
         "admin"),
        ("a negative id", "GET", "/v1/allocations/-1", {}, "admin"),
        ("a huge id", "GET", "/v1/allocations/" + "9" * 40, {}, "admin"),
        ("a path with NUL", "GET", "/v1/hosts/%00", {}, "admin"),
        ("a wrong method", "PATCH", "/v1/hosts", {"json": {}}, "admin"),
        ("an oversized body", "POST", "/v1/clients", _raw(b'{"name": "' + b"y" * (2 << 20) + b'"}'), "admin"),
        ("chunked", "POST", "/v1/allocations", {}, "admin"),
    ]
    return out


def chunked(port: int, token: str | None, total: int = 5 << 20, host: str = "127.0.0.1") -> int:
    """A chunked body past the limit; the status the master answers with (0: none)."""
    try:
        s = socket.create_connection((host, port), timeout=30)
    except OSError:
        return 0
    head = ["POST /v1/allocations HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
            "Transfer-Encoding: chunked"] + ([f"Authorization: Bearer {token}"] if token else [])
    piece = b"x" * (1 << 16)
    frame = b"%x\r\n" % len(piece) + piece + b"\r\n"
    got = b""
    try:
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + b'5\r\n{"a":\r\n')
        sent = 0
        while sent < total and not select.select([s], [], [], 0)[0]:
            s.sendall(frame)
            sent += len(piece)
        s.settimeout(10)
        while b"\r\n\r\n" not in got:
            more = s.recv(65536)
            if not more:
                break
            got += more
    except OSError:
        pass
    finally:
        s.close()
    try:
        return int(got.split()[1]) if got.startswith(b"HTTP/1.1 ") else 0
    except (IndexError, ValueError):
        return 0
