"""The soak's strictest check: no slot of a host is used twice at any moment, judged by what runs.

A few times a second, from outside the master:

1. the processes of this run's activities that live: what each real agent's own state file
   says it runs (WORKDIR/state.json: activity, allocation, pid and start time), each pid checked
   to be that same process and not a zombie; and any activity process that no agent lists, found
   by the APPORTION_* variables every activity is started with (APPORTION_MASTER names this
   run's master, APPORTION_HOST, APPORTION_ACTIVITY, APPORTION_ALLOCATION, APPORTION_SLOTS);
2. the master's holdings: one answer of ``GET /v1/allocations`` is one moment of the master's;
3. the processes again. A process alive in both reads was alive when the master answered.

Then, for each host, every allocation X counts for max(slots its live processes use there,
slots the master says it holds there). Their sum must not pass the host's slots: more means the
master gave slots to one allocation while another allocation's processes still used them, as
when a host comes back from a partition or a loss and is given away before its old processes
are gone. Slots the master fences (held for no one until a process is gone) are in no
allocation's holding, so a correct master never trips this check.

A breach is one episode per host and set of allocations, from its first sample to its last,
with the master's own view of the processes that ran past their holding.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx


@dataclass(frozen=True)
class Running:
    host: str
    activity: int
    allocation: int | None
    slots: int
    pid: int
    listed: bool  # its agent's state file lists it
    note: str = ""  # for one it does not: what the file says of that activity


def _same(p: Any, create_time: float) -> bool:
    import psutil

    try:
        return abs(p.create_time() - create_time) < 0.01 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def running(agents: dict[str, Path], master_url: str) -> dict[tuple[int, float], Running]:
    """This run's live activity processes, by (pid, start time); ``agents``: host -> work directory."""
    import psutil

    out: dict[tuple[int, float], Running] = {}
    files: dict[str, dict[str, Any]] = {}
    for host, workdir in agents.items():
        try:
            listed = files[host] = json.loads((workdir / "state.json").read_text()).get("activities", {})
        except (OSError, ValueError, AttributeError):
            continue  # not written yet: the next sample reads it
        for aid, e in listed.items():
            if not isinstance(e, dict) or e.get("state") != "running" or not e.get("pid"):
                continue
            with contextlib.suppress(psutil.Error, ValueError, TypeError, KeyError):
                p = psutil.Process(int(e["pid"]))
                if _same(p, float(e["create_time"])):
                    slots = int(p.environ().get("APPORTION_SLOTS") or 1)
                    out[(p.pid, float(e["create_time"]))] = Running(host, int(aid), e.get("allocation"), slots,
                                                                    p.pid, True)
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ValueError):
            env = p.environ()
            if env.get("APPORTION_MASTER") != master_url or "APPORTION_ACTIVITY" not in env:
                continue
            key = (p.pid, p.create_time())
            if any(k[0] == p.pid for k in out) or p.status() == psutil.STATUS_ZOMBIE:
                continue
            parent = p.parent()
            if parent is not None and parent.environ().get("APPORTION_ACTIVITY") == env["APPORTION_ACTIVITY"]:
                continue  # a child of the activity's own process: counted with it
            alloc, host = env.get("APPORTION_ALLOCATION"), env.get("APPORTION_HOST", "?")
            entry = files.get(host, {}).get(env["APPORTION_ACTIVITY"])
            note = "absent" if not isinstance(entry, dict) else f"{entry.get('state')}, pid {entry.get('pid')}"
            out[key] = Running(host, int(env["APPORTION_ACTIVITY"]), int(alloc) if alloc else None,
                               int(env.get("APPORTION_SLOTS") or 1), p.pid, False, f"state file: {note}")
    return out


@dataclass
class Episode:
    host: str
    first: float
    last: float
    worst: int
    slots: int
    detail: str


@dataclass
class LiveCheck:
    """The check (module docstring) over one run; ``sample`` from one thread, ``finish`` at the end."""

    agents: dict[str, Path]
    slots: dict[str, int]
    master_url: str
    started: float = field(default_factory=time.monotonic)
    samples: int = 0
    seen: set[tuple[int, float]] = field(default_factory=set)
    unlisted: set[tuple[int, float]] = field(default_factory=set)
    unlisted_e_g: list[str] = field(default_factory=list)
    most: int = 0
    open: dict[tuple[str, frozenset[int]], Episode] = field(default_factory=dict)
    found: list[str] = field(default_factory=list)
    last: list[Running] = field(default_factory=list)

    def hosts_running(self) -> set[str]:
        """The hosts where the last sample found activity processes alive."""
        return {p.host for p in self.last}

    def sample(self, c: httpx.Client) -> None:
        before = running(self.agents, self.master_url)
        try:
            r = c.get("/v1/allocations", timeout=5)
        except httpx.HTTPError:
            return
        if r.status_code != 200:
            return
        allocations = r.json()["allocations"]
        after = running(self.agents, self.master_url)
        # alive in both reads; listed if its agent's state file had it in either (one just started
        # may be written there a moment after it runs)
        both = {k: (v if v.listed else after[k]) for k, v in before.items() if k in after}
        live = list(both.values())
        self.last = live
        self.samples += 1
        self.seen.update(both)
        for k, v in both.items():
            if not v.listed and k not in self.unlisted:
                self.unlisted.add(k)
                if len(self.unlisted_e_g) < 5:
                    self.unlisted_e_g.append(f"{v.host}: activity {v.activity} pid {v.pid} ({v.note})")
        self.most = max(self.most, len(live))
        now = time.monotonic() - self.started
        breached = set()
        for host, slots in self.slots.items():
            procs: dict[int | None, list[Running]] = {}
            for p in live:
                if p.host == host:
                    procs.setdefault(p.allocation, []).append(p)
            held = {a["id"]: a["hosts"].get(host, 0) for a in allocations if a["hosts"].get(host, 0)}
            used = {x: sum(p.slots for p in ps) for x, ps in procs.items()}
            taken = sum(max(used.get(x, 0), held.get(x, 0)) for x in set(used) | set(held))
            if taken <= slots:
                continue
            beyond = frozenset(x if x is not None else -1 for x in used if used[x] > held.get(x, 0))
            key = (host, beyond)
            breached.add(key)
            ep = self.open.get(key)
            if ep is None:
                self.open[key] = Episode(host, now, now, taken, slots, self._detail(c, host, procs, used, held))
            else:
                ep.last, ep.worst = now, max(ep.worst, taken)
        for key in [k for k in self.open if k not in breached]:
            self._close(key)

    def _detail(self, c: httpx.Client, host: str, procs: dict[int | None, list[Running]], used: dict[int | None, int],
                held: dict[int, int]) -> str:
        """Who held what, and the master's own view of the host and of each process past its holding."""
        state = "?"
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            state = next((h["state"] for h in c.get("/v1/hosts", timeout=5).json()["hosts"] if h["name"] == host),
                         "unknown")
        grants = ", ".join(f"{x}: {n}" for x, n in sorted(held.items()))
        past = []
        for x, ps in sorted(procs.items(), key=lambda kv: kv[0] or 0):
            if used[x] <= held.get(x, 0):
                continue
            for p in ps:
                master = "?"
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    r = c.get(f"/v1/activities/{p.activity}", timeout=5)
                    a = r.json()
                    master = "it does not know it" if r.status_code == 404 else \
                        a["state"] + (f", stop: {a['stop_reason']}" if a.get("stop_reason") else "")
                listed = "in its agent's state file" if p.listed else f"NOT in its agent's state file ({p.note})"
                past.append(f"activity {p.activity} of allocation {x} (pid {p.pid}, {p.slots} slot(s), {listed}; "
                            f"the master says {master})")
        return (f"the master holds {{{grants}}} (allocation: slots) while "
                f"{'; '.join(past)} still ran; host state {state}")

    def _close(self, key: tuple[str, frozenset[int]]) -> None:
        ep = self.open.pop(key)
        at = time.strftime("%H:%M:%S", time.gmtime(time.time() - (time.monotonic() - self.started) + ep.first))
        self.found.append(f"fencing: host {ep.host}, {ep.first:.1f}-{ep.last:.1f} s into the run (from {at} UTC): "
                          f"{ep.worst} slots taken of {ep.slots}: {ep.detail}")

    def finish(self) -> list[str]:
        for key in list(self.open):
            self._close(key)
        return self.found

    def figures(self) -> dict[str, Any]:
        return {"samples": self.samples, "processes": len(self.seen), "most_at_once": self.most,
                "not_in_state_file": len(self.unlisted),
                "not_in_state_file_e_g": self.unlisted_e_g, "breaches": len(self.found) + len(self.open)}
