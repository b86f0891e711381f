"""An application manager on the apportion SDK: keep one worker on every granted slot.

It registers as a client, asks for up to N slots, and runs one worker process
(an activity) on each slot it is granted. When the master reclaims slots on a
host (the `reclaim` event), it gives them back before the deadline: it stops
its newest workers on that host and releases the host (a release gives back
what the allocation holds there; the master grants again whatever is still
due, and new workers start on it). When a host is lost, its workers are
forgotten. A worker that ends on its own is started again (at most once a
second on each host, so a worker that cannot run does not spin).

    export APPORTION_TOKEN=...            # a token for the consumer (or admin)
    python examples/service/keep_workers.py --consumer /Apps/batch --slots 8
    python examples/service/keep_workers.py --consumer /Apps/web --slots 4 \
        --worker "python3 -c 'import time; time.sleep(3600)'"

It decides from the allocation as the master reports it (hosts held, slots
being reclaimed) and the activities it runs, read again after each event, so a
missed or repeated event cannot lead it astray. SIGTERM or Ctrl-C ends the
allocation (unless --keep) and exits. Each thing it does is one line on stdout.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
import time
from typing import Any

from apportion.client import ApportionError, Client

LIVE = ("starting", "running")
DEFAULT_WORKER = [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]


def say(*parts: Any) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


class Manager:
    def __init__(self, api: Client, consumer: str, group: str | None, slots: int, name: str,
                 worker: list[str]) -> None:
        self.api = api
        self.consumer = consumer
        self.group = group
        self.slots = slots
        self.name = name
        self.worker = worker
        self.client_id = 0
        self.alloc_id = 0
        self.handled_reclaims: set[tuple[str, float]] = set()
        self.stopped: set[int] = set()  # activities we stopped ourselves
        self.wait_until: dict[str, float] = {}  # host -> no new worker there before this time
        self.pending = False  # a start put off: look again at the next tick

    # -- start ---------------------------------------------------------------------------

    def start(self) -> int:
        """Register, find or make the allocation; -> the event id to read after."""
        self.client_id = self.api.register(self.name, self.consumer)
        after = 0
        while batch := self.api.poll_events(self.client_id, after=after, wait=0):
            after = batch[-1]["id"]  # what came before this run is history: read after it
        mine = [a for a in self.api.allocations(consumer=self.consumer)
                if a.get("client") == self.client_id and a.get("max", 0) > 0]
        if mine:  # registered again under the same name: the allocation lived on
            self.alloc_id = mine[0]["id"]
            say(f"client {self.client_id}: allocation {self.alloc_id} is still there, taking it over")
        else:
            self.alloc_id = self.api.allocate(self.consumer, self.group, 0, self.slots, client=self.client_id)["id"]
            say(f"client {self.client_id}: allocation {self.alloc_id} asks for up to {self.slots} slots "
                f"of {self.consumer}")
        return after

    # -- what runs where -----------------------------------------------------------------

    def workers(self) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
        """Our live workers by host, oldest first, less those told to stop; and by host the
        slots those still use until their agent reports them gone."""
        by_host: dict[str, list[dict[str, Any]]] = {}
        stopping: dict[str, int] = {}
        wall, mono = time.time(), time.monotonic()
        for act in self.api.activities(self.alloc_id):
            if act.get("state") not in LIVE:
                ended = act.get("ended_at")
                if ended is not None and act["id"] not in self.stopped:
                    # it ended on its own: no new worker on its host within a second of
                    # its end, even where this is read before the event that says so
                    until = mono + ended + 1.0 - wall
                    if until > self.wait_until.get(act["host"], 0):
                        self.wait_until[act["host"]] = until
                continue
            if act.get("stopping"):
                stopping[act["host"]] = stopping.get(act["host"], 0) + act.get("slots", 1)
            else:
                by_host.setdefault(act["host"], []).append(act)
        for acts in by_host.values():
            acts.sort(key=lambda a: a["id"])
        return by_host, stopping

    def stop(self, acts: list[dict[str, Any]], why: str) -> None:
        for act in sorted(acts, key=lambda a: -a["id"]):  # newest first
            try:
                self.api.kill_activity(act["id"])
                self.stopped.add(act["id"])
                say(f"stopped activity {act['id']} on {act['host']} ({why})")
            except ApportionError as e:
                if not 400 <= e.status < 500:
                    raise
                say(f"could not stop activity {act['id']}: {e}")

    def reconcile(self) -> None:
        """One worker per held slot, on every host not being reclaimed."""
        self.pending = False
        alloc = self.api.allocation(self.alloc_id)
        for r in alloc.get("reclaiming") or []:
            self.give_back(r)
        if alloc.get("reclaiming"):
            alloc = self.api.allocation(self.alloc_id)
        held: dict[str, int] = alloc.get("hosts") or {}
        reclaiming = {r["host"] for r in alloc.get("reclaiming") or []}
        running, stopping = self.workers()
        for host, acts in running.items():
            if host not in held:
                self.stop(acts, "the host is no longer held")
            elif len(acts) > held[host]:
                self.stop(acts[held[host]:], "more workers than slots")
        for host, n in sorted(held.items()):
            if host in reclaiming:
                continue
            missing = n - len(running.get(host, [])) - stopping.get(host, 0)
            if missing > 0 and self.wait_until.get(host, 0) > time.monotonic():
                self.pending = True  # a worker there just ended on its own: not at once again
                continue
            for _ in range(missing):
                try:
                    act = self.api.start_activity(self.alloc_id, host, self.worker)
                except ApportionError as e:
                    say(f"could not start a worker on {host}: {e}")
                    break
                say(f"started activity {act['id']} on {host}")

    # -- events --------------------------------------------------------------------------

    def on_event(self, e: dict[str, Any]) -> None:
        if e.get("allocation") != self.alloc_id:
            return
        kind, host = e.get("type"), e.get("host")
        if kind == "reclaim":
            left = (e.get("deadline") or time.time()) - time.time()
            say(f"reclaim: {e.get('slots')} slot(s) on {host} for {e.get('for')}, deadline in {left:.1f}s")
        elif kind == "granted":
            say(f"granted {e.get('slots')} slot(s) on {host}")
        elif kind in ("lost", "removed"):
            # the master ends the activities there itself (a lost host's as "lost"): forget them
            say(f"{kind}: {e.get('slots')} slot(s) on {host}: forgetting its workers there")
        elif kind == "activity" and e.get("state") not in LIVE:
            if e.get("activity") not in self.stopped:  # it ended on its own: restart, at most once a second
                self.wait_until[host] = time.monotonic() + 1.0
            say(f"activity {e.get('activity')} on {host} ended: {e.get('state')}"
                + (f" (exit code {e['exit_code']})" if e.get("exit_code") is not None else "")
                + (f" (signal {e['signal']})" if e.get("signal") is not None else ""))
        self.reconcile()

    def give_back(self, reclaim: dict[str, Any]) -> None:
        """A reclaim: stop as many of our newest workers on its host as it asks for, and give
        back exactly those slots before the deadline (the others keep running)."""
        host, n = reclaim["host"], int(reclaim["slots"])
        key = (host, float(reclaim.get("deadline") or 0))
        if key in self.handled_reclaims:
            return
        self.stop(self.workers()[0].get(host, [])[-n:] if n else [], f"reclaimed for {reclaim.get('for')}")
        self.api.release(self.alloc_id, slots={host: n})
        self.handled_reclaims.add(key)
        say(f"released {n} slot(s) on {host}")

    def run(self, after: int, stopping: threading.Event) -> None:
        """React to each event; a call that fails (say, during a failover) is tried again
        half a second later, from the allocation as it is then."""
        behind = True
        with self.api.events(self.client_id, after=after) as stream:
            while not stopping.is_set():
                try:
                    if behind:
                        behind = False
                        self.reconcile()
                    self.on_event(stream.next(timeout=0.5))
                except TimeoutError:
                    behind = self.pending
                    continue
                except ApportionError as e:
                    if e.status in (401, 403):
                        raise
                    say(f"{e}: trying again")
                    behind = True

    def end(self) -> None:
        self.api.delete(self.alloc_id)
        say(f"allocation {self.alloc_id} ended")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", help="master URL(s), comma-separated (default: APPORTION_MASTER or "
                    "http://127.0.0.1:8470)")
    ap.add_argument("--token-file", help="a file with the token (default: APPORTION_TOKEN)")
    ap.add_argument("--consumer", required=True, help="the leaf consumer to run as, e.g. /Apps/batch")
    ap.add_argument("--group", help="the resource group (default: the consumer's groups)")
    ap.add_argument("--slots", type=int, default=4, help="the most slots to ask for (default 4)")
    ap.add_argument("--name", help="the client name (default: keep-workers-CONSUMER)")
    ap.add_argument("--worker", help="the worker's command line (default: a Python sleep loop)")
    ap.add_argument("--keep", action="store_true", help="leave the allocation in place on exit")
    args = ap.parse_args(argv)

    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    name = args.name or "keep-workers" + args.consumer.replace("/", "-")
    worker = shlex.split(args.worker) if args.worker else DEFAULT_WORKER
    try:
        with Client(args.master, token_file=args.token_file) as api:
            m = Manager(api, args.consumer, args.group, args.slots, name, worker)
            after = m.start()
            try:
                m.run(after, stopping)
            finally:
                if not args.keep:
                    m.end()
    except ApportionError as e:
        print(f"keep_workers: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
