"""What an ``ApportionCluster`` knows of its workers and slots, and what follows from it.

Pure bookkeeping, no I/O and no clock (the caller passes ``now``): the cluster feeds it
what the master and the scheduler say, and asks it which workers to start where, and
which to retire to give slots back. One Dask worker is one activity using
``worker_slots`` slots of one host.

A held slot is in one of three uses: a live worker's, *giving back* (chosen to be
released: its worker retires first, then the slots are released), or unused (a new
worker may start there). Retiring workers' slots count as giving back, never twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

LIVE = frozenset({"starting", "running"})
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0


@dataclass(slots=True)
class DaskWorker:
    """One Dask worker: the activity that runs it, and what the scheduler knows of it."""

    activity: int
    name: str
    host: str
    slots: int
    state: str = "starting"  # the activity's state: starting, running, exited, killed, lost
    stopping: bool = False  # the master was told to stop its process (a signal is on its way)
    stop_reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    retiring: str | None = None  # why it was chosen to go: reclaim, scale, lost, close
    address: str | None = None  # its address at the scheduler, while connected
    connected_once: bool = False

    @property
    def live(self) -> bool:
        return self.state in LIVE

    @property
    def active(self) -> bool:
        """Live and staying: it counts towards the cluster's workers."""
        return self.state in LIVE and self.retiring is None

    @property
    def forced(self) -> bool:
        """Its process was sent a signal (by the master at a deadline, or by a kill) or died of one."""
        return self.stop_reason is not None or self.state == "killed" or self.signal is not None


@dataclass
class Books:
    worker_slots: int
    workers: dict[int, DaskWorker] = field(default_factory=dict)  # by activity id
    giving_back: dict[str, int] = field(default_factory=dict)  # host -> slots chosen to go back, not yet released
    handled: set[tuple[str, float]] = field(default_factory=set)  # reclaims (host, deadline) being honoured
    quiet_until: dict[str, float] = field(default_factory=dict)  # host -> no new worker there before this
    failures: dict[str, int] = field(default_factory=dict)  # host -> workers that ended on their own in a row

    def __post_init__(self) -> None:
        if self.worker_slots < 1:
            raise ValueError(f"worker_slots must be 1 or more, not {self.worker_slots}")
        self._by_name: dict[str, int] = {}

    # -- what happened ----------------------------------------------------------------
    def add(self, activity: int, name: str, host: str) -> DaskWorker:
        w = DaskWorker(activity, name, host, self.worker_slots)
        self.workers[activity] = w
        self._by_name[name] = activity
        return w

    def named(self, name: str) -> DaskWorker | None:
        aid = self._by_name.get(name)
        return None if aid is None else self.workers.get(aid)

    def at(self, address: str) -> DaskWorker | None:
        for w in self.workers.values():
            if w.address == address:
                return w
        return None

    def note_activity(self, activity: int, state: str, *, exit_code: int | None = None, signal: int | None = None,
                      stopping: bool | None = None, stop_reason: str | None = None,
                      now: float = 0.0) -> DaskWorker | None:
        """An activity's state as the master reports it. Returns the worker when it has just
        ended without being asked to (its host is then kept quiet for a while, with backoff)."""
        w = self.workers.get(activity)
        if w is None:
            return None
        was_live = w.live
        if state not in LIVE or w.live:  # an end is final: a late "running" does not revive it
            w.state = state
        if stopping is not None:
            w.stopping = w.stopping or stopping
        if stop_reason is not None:
            w.stop_reason = stop_reason
        if not w.live:
            w.exit_code = exit_code if exit_code is not None else w.exit_code
            w.signal = signal if signal is not None else w.signal
        if was_live and not w.live and w.retiring is None and not w.stopping and state != "lost":
            self._back_off(w.host, now)
            return w
        return None

    def note_connected(self, name: str, address: str) -> DaskWorker | None:
        w = self.named(name)
        if w is not None and w.live:
            w.address = address
            w.connected_once = True
            self.failures.pop(w.host, None)
            self.quiet_until.pop(w.host, None)
        return w

    def note_disconnected(self, address: str) -> DaskWorker | None:
        w = self.at(address)
        if w is not None:
            w.address = None
        return w

    def _back_off(self, host: str, now: float) -> None:
        n = self.failures[host] = self.failures.get(host, 0) + 1
        self.quiet_until[host] = now + min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (n - 1))

    # -- what is where ------------------------------------------------------------------
    # (list() first: other threads read these while the cluster's loop adds workers)
    def active(self) -> list[DaskWorker]:
        return [w for w in list(self.workers.values()) if w.active]

    def live(self) -> list[DaskWorker]:
        return [w for w in list(self.workers.values()) if w.live]

    def on(self, host: str) -> list[DaskWorker]:
        return [w for w in list(self.workers.values()) if w.host == host and w.live]

    def unused(self, held: Mapping[str, int]) -> dict[str, int]:
        """Held slots per host that no staying worker uses and that are not being given back."""
        out: dict[str, int] = {}
        for host, n in held.items():
            used = sum(w.slots for w in self.on(host) if w.retiring is None)
            free = n - used - self.giving_back.get(host, 0)
            if free > 0:
                out[host] = free
        return out

    def starts(self, held: Mapping[str, int], wanted: int, now: float) -> dict[str, int]:
        """New workers to start per host: whole workers on unused slots, on hosts not kept
        quiet, never more than ``wanted`` staying workers in all."""
        room = wanted - len(self.active())
        out: dict[str, int] = {}
        for host, free in sorted(self.unused(held).items()):
            if room <= 0:
                break
            if self.quiet_until.get(host, 0.0) > now:
                continue
            n = min(free // self.worker_slots, room)
            if n > 0:
                out[host] = n
                room -= n
        return out

    def quiet_hosts(self, now: float) -> dict[str, float]:
        return {h: t for h, t in self.quiet_until.items() if t > now}

    # -- what to give back -------------------------------------------------------------------
    def choose_for_reclaim(self, host: str, slots: int, held_there: int) -> list[DaskWorker]:
        """Workers on ``host`` to retire so that ``slots`` slots there can be released:
        unused slots go first, then workers, connected ones first (they can retire at once),
        newest first among them (they have done the least work)."""
        free = max(0, held_there - sum(w.slots for w in self.on(host) if w.retiring is None)
                   - self.giving_back.get(host, 0))
        need = slots - free
        chosen: list[DaskWorker] = []
        for w in sorted((w for w in self.on(host) if w.retiring is None),
                        key=lambda w: (w.address is None, -w.activity)):
            if need <= 0:
                break
            chosen.append(w)
            need -= w.slots
        return chosen

    def choose_for_scale(self, keep: int, ranked: Iterable[str] = ()) -> list[DaskWorker]:
        """Staying workers to retire so that ``keep`` stay: those not connected yet first, then
        in the scheduler's order (``ranked``: the names it would close, cheapest first), then
        newest first."""
        staying = self.active()
        extra = len(staying) - max(0, keep)
        if extra <= 0:
            return []
        rank = {name: i for i, name in enumerate(ranked)}
        order = sorted(staying, key=lambda w: (w.address is not None, rank.get(w.name, len(rank)), -w.activity))
        return order[:extra]

    def retire(self, workers: Iterable[DaskWorker], why: str) -> None:
        """Mark workers as going: no replacement starts on their slots, which are given back."""
        for w in workers:
            if w.retiring is None:
                w.retiring = why
                self.giving_back[w.host] = self.giving_back.get(w.host, 0) + w.slots

    def give_back(self, host: str, slots: int) -> None:
        """Unused slots on ``host`` chosen to be released (no worker to retire first)."""
        if slots > 0:
            self.giving_back[host] = self.giving_back.get(host, 0) + slots

    def released(self, host: str, slots: int) -> None:
        left = self.giving_back.get(host, 0) - slots
        if left > 0:
            self.giving_back[host] = left
        else:
            self.giving_back.pop(host, None)

    def forget_host(self, host: str) -> list[DaskWorker]:
        """The host was lost or its slots removed: nothing is given back there any more.
        -> its workers the master still counts as live (it ends them itself)."""
        self.giving_back.pop(host, None)
        return [w for w in self.on(host)]
