"""One load-generator process of `apportion bench service`: many clients on one event loop.

Run as ``python -m apportion.bench.service_load CONFIG.json``. It registers its clients,
prints ``ready``, waits for ``go T_GO T_END`` on stdin, and until T_END each client
loops: create an allocation (max 1), wait for its ``granted`` event (long poll or
Server-Sent Events), delete it. It then writes what it saw to the config's ``out``
file: per client every allocation with its times (Unix seconds: create sent, 201
received, granted event received, delete sent, delete answered), every event id it
received in order, and the failures by kind.

A master that dies is waited for (connection errors are retried for ``retry_for``
seconds; a standby's 503 leads to the leader). A create whose answer was lost has an
unknown outcome: the client lists its allocations and deletes any it did not know of
("adopted"), so nothing it made is left behind.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections import Counter
from typing import Any

from apportion.bench.service_http import Http, StreamRefused, Transport, leader_in

# an allocation record: [id, create sent, 201 received, granted received, delete sent, delete answered, adopted]
A_ID, A_SENT, A_CREATED, A_GRANTED, A_DEL_SENT, A_DELETED, A_ADOPTED = range(7)


class Pace:
    """Create times spread evenly at ``rate`` per second (None: as fast as the clients go).
    Never more than one second of backlog is made up in a burst."""

    def __init__(self, rate: float | None, t0: float) -> None:
        self.rate, self.t0, self.k = rate, t0, 0

    async def wait(self) -> None:
        if not self.rate:
            return
        t = self.t0 + self.k / self.rate
        self.k += 1
        d = t - time.time()
        if d > 0:
            await asyncio.sleep(d)
        elif d < -1.0:
            self.t0 += -d - 1.0


class Client:
    def __init__(self, cfg: dict[str, Any], name: str, consumer: str) -> None:
        self.cfg = cfg
        self.name, self.consumer = name, consumer
        self.http = Http(cfg["urls"], cfg["token"])
        self.sse_http = Http(cfg["urls"], cfg["token"]) if cfg["events"] == "sse" else None
        self.id = 0
        self.last = 0
        self.received: list[int] = []
        self.granted: dict[int, float] = {}
        self.allocs: list[list[Any]] = []
        self.known: set[int] = set()
        self.errors: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()
        self.samples: list[str] = []
        self.wake = asyncio.Event()
        self.retry_for = float(cfg.get("retry_for", 60.0))

    def fail(self, kind: str, detail: Any = "") -> None:
        self.errors[kind] += 1
        if len(self.samples) < 5:
            self.samples.append(f"{kind}: {str(detail)[:200]}")

    async def api(self, method: str, path: str, body: Any = None, *, retry: bool,
                  timeout: float = 30.0) -> tuple[int, Any]:
        """One call, following the leader; connection errors retried (when ``retry``) for
        ``retry_for`` seconds. Transport when it gives up."""
        end = time.time() + self.retry_for
        backoff = 0.02
        while True:
            try:
                status, value = await self.http.call(method, path, body, timeout)
            except Transport:
                self.retries[f"transport {method}"] += 1
                if not retry or time.time() > end:
                    raise
                self.http.next_url()
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(0.5, backoff * 2)
                continue
            if status == 503 and time.time() < end:
                self.retries["503"] += 1
                leader = leader_in(status, value)
                self.http.next_url(leader)
                await asyncio.sleep(0.01 if leader else backoff * (0.5 + random.random()))
                backoff = min(0.5, backoff * 2)
                continue
            return status, value

    async def register(self) -> None:
        status, value = await self.api("POST", "/v1/clients", {"name": self.name, "consumer": self.consumer},
                                       retry=True)
        if status != 201:
            raise RuntimeError(f"register {self.name}: {status} {value}")
        self.id = int(value["id"])

    def take(self, e: dict[str, Any], now: float) -> None:
        eid = int(e["id"])
        self.received.append(eid)
        if eid <= self.last:
            self.fail("event out of order or twice", f"event {eid} after {self.last}")
        self.last = max(self.last, eid)
        if e.get("type") == "granted":
            self.granted.setdefault(int(e["allocation"]), now)

    async def poll(self, wait: float) -> None:
        try:
            status, value = await self.api("GET", f"/v1/clients/{self.id}/events?after={self.last}"
                                           f"&wait={wait:.2f}", retry=True, timeout=wait + 15)
        except Transport as e:
            self.fail("events: gave up", e)
            return
        if status != 200:
            self.fail(f"events {status}", value)
            await asyncio.sleep(0.05)
            return
        now = time.time()
        for e in value.get("events", []):
            self.take(e, now)

    async def sse_reader(self) -> None:
        assert self.sse_http is not None
        backoff = 0.02
        while True:
            buf = b""
            try:
                async for chunk in self.sse_http.stream(f"/v1/clients/{self.id}/events", self.last):
                    backoff = 0.02
                    buf += chunk
                    while b"\n\n" in buf:
                        block, buf = buf.split(b"\n\n", 1)
                        for line in block.split(b"\n"):
                            if line.startswith(b"data:"):
                                self.take(json.loads(line[5:]), time.time())
                    self.wake.set()
            except StreamRefused as e:
                self.retries[f"sse {e.status}"] += 1
                self.sse_http.next_url(leader_in(e.status, e.body))
            except Transport:
                self.retries["sse transport"] += 1
                self.sse_http.next_url()
            except Exception as e:  # noqa: BLE001 - a reader that dies would leave its client deaf
                self.fail("events: unreadable stream", repr(e))
                self.sse_http.close()
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(0.5, backoff * 2)

    async def wait_grant(self, aid: int, limit: float) -> float | None:
        wait = float(self.cfg.get("poll_wait", 5.0))
        while aid not in self.granted:
            left = limit - time.time()
            if left <= 0:
                return None
            if self.sse_http is None:
                await self.poll(min(wait, left))
            else:
                self.wake.clear()
                if aid in self.granted:
                    break
                try:
                    await asyncio.wait_for(self.wake.wait(), left)
                except TimeoutError:
                    pass
        return self.granted.pop(aid)

    async def delete(self, rec: list[Any]) -> None:
        rec[A_DEL_SENT] = time.time()
        sent_before = False
        end = time.time() + self.retry_for
        while True:
            try:
                status, value = await self.api("DELETE", f"/v1/allocations/{rec[A_ID]}", retry=False)
            except Transport as e:
                sent_before = True
                if time.time() > end:
                    self.fail("delete: gave up", e)
                    return
                self.http.next_url()
                await asyncio.sleep(0.05 + 0.1 * random.random())
                continue
            if status == 204 or (status == 404 and sent_before):
                rec[A_DELETED] = time.time()
            else:
                self.fail(f"delete {status}", value)
            return

    async def adopt(self, sent: float) -> None:
        """After a create whose answer was lost: delete whatever of ours we did not know of."""
        try:
            status, value = await self.api("GET", f"/v1/allocations?client={self.id}", retry=True)
        except Transport as e:
            self.fail("list: gave up", e)
            return
        if status != 200:
            self.fail(f"list {status}", value)
            return
        for a in value.get("allocations", []):
            if a["id"] not in self.known:
                rec = [a["id"], sent, None, None, None, None, True]
                self.known.add(a["id"])
                self.allocs.append(rec)
                await self.delete(rec)

    async def one(self, body: dict[str, Any]) -> None:
        sent = time.time()
        try:
            status, value = await self.api("POST", "/v1/allocations", body, retry=False)
        except Transport:
            self.retries["create: outcome unknown"] += 1
            await asyncio.sleep(0.05)
            await self.adopt(sent)
            return
        if status != 201:
            self.fail(f"create {status}", value)
            await asyncio.sleep(0.05)
            return
        rec = [int(value["id"]), sent, time.time(), None, None, None, False]
        self.known.add(rec[A_ID])
        self.allocs.append(rec)
        rec[A_GRANTED] = await self.wait_grant(rec[A_ID], time.time() + float(self.cfg.get("grant_timeout", 30.0)))
        if rec[A_GRANTED] is None:
            self.fail("no grant in time", f"allocation {rec[A_ID]}")
        await self.delete(rec)

    async def loop(self, pace: Pace, t_end: float) -> None:
        body = {"client": self.id, "consumer": self.consumer, "group": self.cfg["group"], "min": 1, "max": 1}
        if self.cfg.get("resources"):
            body["resources"] = self.cfg["resources"]
        while time.time() < t_end:
            await pace.wait()
            if time.time() >= t_end:
                break
            await self.one(body)

    def result(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "consumer": self.consumer, "received": self.received,
                "allocs": self.allocs, "errors": dict(self.errors), "retries": dict(self.retries),
                "samples": self.samples}


async def main(cfg: dict[str, Any]) -> dict[str, Any]:
    clients = [Client(cfg, c["name"], c["consumer"]) for c in cfg["clients"]]
    sem = asyncio.Semaphore(16)

    async def reg(c: Client) -> None:
        async with sem:
            await c.register()

    await asyncio.wait_for(asyncio.gather(*(reg(c) for c in clients)), 120)
    readers = [asyncio.create_task(c.sse_reader()) for c in clients if c.sse_http is not None]
    print("ready", flush=True)
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    parts = line.split()
    if len(parts) != 3 or parts[0] != "go":
        raise SystemExit(f"expected 'go T_GO T_END' on stdin, got {line!r}")
    t_go, t_end = float(parts[1]), float(parts[2])
    await asyncio.sleep(max(0.0, t_go - time.time()))
    pace = Pace(cfg.get("rate"), t_go)
    tasks = [asyncio.create_task(c.loop(pace, t_end)) for c in clients]
    drain = float(cfg.get("drain", 20.0))
    done, pending = await asyncio.wait(tasks, timeout=max(0.0, t_end - time.time()) + drain)
    for t in pending:
        t.cancel()
    for t in done:
        if t.exception() is not None:
            clients[tasks.index(t)].fail("client crashed", repr(t.exception()))
    for t in readers:
        t.cancel()
    await asyncio.gather(*pending, *readers, return_exceptions=True)
    for c in clients:
        c.http.close()
        if c.sse_http is not None:
            c.sse_http.close()
    return {"t_go": t_go, "t_end": t_end, "unfinished": len(pending), "clients": [c.result() for c in clients]}


def run(path: str) -> None:
    with open(path) as f:
        cfg = json.load(f)
    try:
        import uvloop

        result = uvloop.run(main(cfg))
    except ImportError:
        result = asyncio.run(main(cfg))
    with open(cfg["out"], "w") as f:
        json.dump(result, f)
    print("done", flush=True)


if __name__ == "__main__":
    run(sys.argv[1])
