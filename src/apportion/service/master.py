"""The middle layer of the live master: one task alone drives the engine.

API calls and agent reports become operations on a queue. The task takes every
operation waiting, applies them to the engine, runs a cycle, and commits the
batch (operations, decisions, events) to the store in one transaction. Only then
does it publish the batch to what the API reads, answer the callers and wake the
event streams and agents: a crash between the commit and the announcement loses
nothing, and nothing is announced that was not stored. Operations that arrive
during a cycle wait for the next one (coalesced). A timer runs a cycle at least
every ``tick`` seconds, so reclaim deadlines are kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apportion.engine import Engine, HostState, Request
from apportion.engine.decisions import Decisions, Removal
from apportion.engine.drf import KindAlloc
from apportion.engine.replan import rebuild
from apportion.engine.state import Allocation, PendingReclaim
from apportion.plan import PlanError, Problem, parse_requirement
from apportion.service import commitguard, execution, hoststates, liveplan
from apportion.service import devices, quotas, resources, walltimes
from apportion.service.hostfaults import StartFailures
from apportion.service.refusal import ApiError  # here too: `from apportion.service.master import ApiError`
from apportion.service.published import (
    ActivityPub,
    AllocationPub,
    ClientPub,
    HoldingPub,
    HostPub,
)
from apportion.service.store.writer import Batch, Snapshot, StoreWriter

log = logging.getLogger("apportion.master")
RECENT_EVENTS = 500  # per client, kept in memory (up to twice that); older ones are read from the store


@dataclass(slots=True)
class Settings:
    tick: float = 1.0  # seconds between timer cycles (reclaim deadlines)
    heartbeat: float = 1.0  # the agents' heartbeat interval
    missed: int = 3  # heartbeats missed before a host is unreachable
    host_lost_after: float = 60.0  # seconds without a heartbeat before a host is down (service/hoststates.py)
    kill_grace: float = 10.0  # SIGTERM, then SIGKILL after this many seconds
    output_lines: int = 100


# Starts one heartbeat answer carries at most. An agent starts them one after another before its
# next heartbeat; 200 in one answer kept a busy agent silent past the missed-heartbeat limit, and the
# master took its host for dead with everything on it.
START_BATCH = 16


@dataclass(slots=True)
class Op:
    fn: Callable[[Batch, float], Any]
    future: asyncio.Future


def _found(table: dict, key: Any, what: str) -> Any:
    """``table[key]``, or a 404 naming what was asked for."""
    got = table.get(key)
    if got is None:
        raise ApiError(404, f"no {what} {key}")
    return got


def _not_ducc(parsed: liveplan.ParsedPlan) -> None:
    from apportion.plan.ducc_scenario import is_ducc_scenario

    if is_ducc_scenario(parsed.data):
        raise PlanError([Problem(parsed.source, parsed.positions.get(("ducc",)), "ducc",
                                 "this master serves an EGO plan; a master serves one kind of plan: "
                                 "start a DUCC master on another store")])


def in_subtree(consumer: str, root: str) -> bool:
    return root == "/" or consumer == root or consumer.startswith(root + "/")


class Master:
    """Owns the engine. Every method named ``op_*`` runs inside the task, between cycles."""

    def __init__(self, writer: StoreWriter, snapshot: Snapshot, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.writer = writer
        self.queue: asyncio.Queue[Op] = asyncio.Queue()
        self._wake = asyncio.Event()
        self.ready = False
        self.store_down: str | None = None  # why the store takes no writes now (service/commitguard.py)
        self.store_down_since: float | None = None
        self.stale = False  # the store could not be read back after a failed commit: nothing is served
        self.cycles = 0
        self.again = False  # the last cycle said the next one may decide more at once (Decisions.again)
        self.last_cycle_seconds = 0.0
        self.observers: list[Callable[[Decisions, float], None]] = []  # metrics
        self.committed: list[Callable[[Batch], None]] = []  # after each publication: console feed, history
        # published (committed) state: read by the API
        self.plan_version = snapshot.plan_version
        self.plan_text = snapshot.plan_text
        self.plan_by = snapshot.plan_by
        self.plan_at = snapshot.plan_at
        self.parsed = liveplan.parse(snapshot.plan_text, "<plan in force>", positions=False)
        self.clients: dict[int, ClientPub] = {c.id: c for c in snapshot.clients}
        # (consumer, name) -> client: a name is per consumer (a tenant learns nothing of another's names)
        self.client_names: dict[tuple[str, str], int] = {(c.consumer, c.name): c.id for c in snapshot.clients}
        self.hosts: dict[str, HostPub] = {h.name: h for h in snapshot.hosts}
        self.allocations: dict[int, AllocationPub] = {a.id: a for a in snapshot.allocations}
        self.holdings: dict[int, HoldingPub] = {}
        self.activities: dict[int, ActivityPub] = {a.id: a for a in snapshot.activities}
        self.live_on: dict[str, dict[int, ActivityPub]] = {}  # host -> its starting or running activities
        for a in self.activities.values():
            if a.live:
                self.live_on.setdefault(a.host, {})[a.id] = a
        self.host_used: dict[str, int] = {}
        self.kind_used: dict[str, int] = {}  # of host_used, the slots vector allocations hold (resources.py)
        self.kind_slots: dict[str, int] = {}  # host -> the part of its slots vector work holds (published)
        self.start_failures = StartFailures.rebuilt(self.activities.values())
        self.next_event = snapshot.next_event
        self._next_alloc = max([*self.allocations, snapshot.max_allocation]) + 1
        self._next_activity = max([*self.activities, snapshot.max_activity]) + 1
        self._next_client = max([*self.clients, snapshot.max_client]) + 1  # ids are never reused
        self._seq = max((a.seq for a in self.allocations.values()), default=0) + 1
        self.event_waiters: dict[int, asyncio.Event] = {}
        self.host_waiters: dict[str, asyncio.Event] = {}
        self.recent_events: dict[int, list[dict[str, Any]]] = {}  # client -> its latest events
        self.recent_floor: dict[int, int] = {}  # client -> every event of it after this id is in recent_events
        self.first_event = self.next_event  # events before this id are read from the store
        self._now = time.time()
        # host -> its activities declared lost whose processes may still run (service/hoststates.py)
        self.orphans: dict[str, dict[int, ActivityPub]] = {}
        self._init_core(snapshot)
        self.quota = quotas.Book.of(self.clients.values(), self.allocations, self.live_on,
                                    getattr(self, "jobs", {}).values())  # kept by the hooks below
        # a restart gives every host a fresh chance to heartbeat before it is declared unreachable
        now = time.time()
        for h in self.hosts.values():
            h.last_seen = now
            h.unreachable_since = now if h.state == hoststates.UNREACHABLE else None

    kind = "ego"  # the kind of plan this master serves (DuccMaster: "ducc")

    def _init_core(self, snapshot: Snapshot) -> None:
        """The engine, rebuilt from the store (docs/service.md, "Recovery")."""
        self.plan = liveplan.compile_live(self.parsed, self._reported())
        self.consumers = self.plan.consumer_map()
        self.group_names = {g.name for g in self.plan.groups}
        self.engine = Engine(self.plan)
        self.engine.state.changed = set()
        self.engine.kinds.changed = set()
        self._restore(snapshot)
        self._state_seen = self.engine.state
        self._replan = False
        # the fences restored, published from the start (then by each step)
        self.fences: dict[tuple[str, str], tuple[int, str | None, str | None, int]] = resources.fences(self.engine)
        self.kind_slots = resources.kind_slots(self.engine)  # and from here on, what changed of it

    # -- recovery -------------------------------------------------------------------
    def _reported(self) -> list[liveplan.ReportedHost]:
        # an unreachable host compiles as closed (a plan knows no such state); the engine is told after
        return [liveplan.ReportedHost(h.name, h.slots, h.memory, h.attributes,
                                      "closed" if h.state == hoststates.UNREACHABLE else h.state,
                                      resources.host_vector(h))
                for h in self.hosts.values()]

    def _request(self, a: AllocationPub) -> Request:
        req = parse_requirement(a.requirement) if a.requirement else None
        need = resources.slot_vector(a)  # what each slot needs, where it says (service/resources.py)
        return Request(id=str(a.id), consumer=a.consumer, max=a.max, min=a.min, groups=tuple(a.groups),
                       order=a.order, exclusive=a.exclusive, requirement=resources.where(self, a, need, req),
                       requirement_text=a.requirement, seq=a.seq, resources=need,
                       walltime=a.walltime)

    def _restore(self, snap: Snapshot) -> None:
        by_request: dict[int, list[HoldingPub]] = {}
        ids: dict[int, int] = {}
        for hid, h in snap.holdings:
            by_request.setdefault(h.request, []).append(h)
            ids[id(h)] = hid
        gone = []
        for a in sorted(self.allocations.values(), key=lambda a: a.seq):
            c = self.engine.state.consumers.get(a.consumer)
            if c is None or not c.is_leaf:
                gone.append(a.id)
                continue
            held = []
            for h in by_request.get(a.id, []):
                if h.host not in self.engine.state.hosts:
                    continue
                mark = PendingReclaim(h.deadline, h.beneficiary, h.reason or "") if h.deadline is not None else None
                held.append((ids[id(h)], h.group, h.host, h.slots, h.source, mark))
            resources.restore(self, self._request(a), held, a.blocked)
        for aid in gone:
            log.warning("allocation %s: consumer %s is not a leaf of the plan in force; dropped", aid,
                        self.allocations[aid].consumer)
            del self.allocations[aid]
        s = self.engine.state
        for (req, host), (n, group, pool, pooled) in snap.fences:
            if host in s.hosts and not resources.restore_fence(self, req, host, n):
                if pooled and group is not None and pool is not None:
                    s.fence(str(req), host, pooled, (group, pool))
                if n - pooled:
                    s.fence(str(req), host, n - pooled)
        for on in self.live_on.values():
            for act in on.values():
                resources.count_in_use(self, act.allocation, act.host, act.slots)
        hoststates.rebuild(self)
        for name, h in self.hosts.items():
            if name in s.hosts and s.hosts[name].state.value != h.state:
                self.engine.set_host_state(name, HostState(h.state), keep_in_use=True)
        walltimes.restore(self)
        s.changed = set()
        self.engine.kinds.changed = set()
        self._publish_holdings_full([(a.id, self._holding(a)) for a in resources.allocations(self.engine)])

    # -- the task --------------------------------------------------------------------
    async def submit(self, fn: Callable[[Batch, float], Any]) -> Any:
        """Run ``fn`` inside the task, in the next batch; its result once committed."""
        fut = asyncio.get_running_loop().create_future()
        self.queue.put_nowait(Op(fn, fut))
        self._wake.set()
        return await fut

    async def run(self) -> None:
        # a store that cannot take a write (a full disk) is found before the master says ready
        commitguard.check(self)
        self.ready = True
        tick = self.settings.tick
        chained = False
        while True:
            if self.store_down is not None:
                await commitguard.wait(self, self._serve_read)
                continue
            deadline = self._next_deadline()
            timeout = tick if deadline is None else max(0.0, min(tick, deadline - time.time()))
            # a cycle that says the next may decide more (a reservation's request started, so
            # another gets the reservation; or work with a walltime started, so planned starts
            # and backfill move) is followed by one at once, not a tick later; never two in a row
            if self.again and not chained:
                timeout, chained = 0.0, True
            else:
                chained = False
            if self.queue.empty() and timeout > 0:
                try:  # (asyncio.timeout: no task made for each wait, as wait_for makes)
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            self._wake.clear()
            ops: list[Op] = []
            while not self.queue.empty():
                ops.append(self.queue.get_nowait())
            await self._step(ops)

    async def _step(self, ops: list[Op]) -> None:
        batch, results, decisions, broken = self._attempt(ops)
        if broken:  # an error of the master's own: the engine may be half-changed
            commitguard.failed(self, ops, None, broken)
            return
        try:
            # on this thread, not a worker's: from the first change of this step to its
            # publication nothing else runs, so no answer and no agent command can show a
            # change the store does not hold yet
            self.writer.commit(batch)
        except Exception as e:  # noqa: BLE001 - the store refused: the engine is ahead of it
            commitguard.failed(self, ops, e, {})
            return
        self._finish(batch, decisions, results)

    def _attempt(self, ops: list[Op]) -> tuple[Batch, list[tuple[Op, Any, BaseException | None]], Any,
                                                dict[int, BaseException]]:
        """``ops`` applied and a cycle run, into a new batch (not committed): the batch, each
        operation's result or refusal, the decisions, and the operations that failed with an
        error of the master's own (by index; then no cycle is run)."""
        now = self._now = time.time()
        batch = Batch()
        results: list[tuple[Op, Any, BaseException | None]] = []
        broken: dict[int, BaseException] = {}
        for i, op in enumerate(ops):
            try:
                results.append((op, op.fn(batch, now), None))
            except ApiError as e:
                results.append((op, None, e))
            except Exception as e:
                if not getattr(op.fn, "read_only", False):
                    log.exception("an operation failed: the master goes back to what the store holds")
                    broken[i] = e
                    continue
                log.exception("a read-only operation failed")
                results.append((op, None, ApiError(500, f"internal error: {e.__class__.__name__}")))
        if broken:
            return batch, results, None, broken
        decisions = self._cycle(batch, now)
        return batch, results, decisions, broken

    def _finish(self, batch: Batch, decisions: Any, results: list[tuple[Op, Any, BaseException | None]]) -> None:
        """A committed batch published, its listeners told, its callers answered."""
        self._publish(batch)
        for hook in self.committed:
            hook(batch)
        if decisions is not None:
            for obs in self.observers:
                obs(decisions, self.last_cycle_seconds)
        for op, result, error in results:
            if op.future.done():
                continue
            if error is not None:
                op.future.set_exception(error)
            else:
                op.future.set_result(result)

    def _serve_read(self, op: Op) -> None:
        """A read-only operation run and answered outside a batch (the store takes no writes)."""
        try:
            op.future.set_result(op.fn(Batch(), time.time()))
        except ApiError as e:
            op.future.set_exception(e)
        except Exception as e:  # noqa: BLE001
            log.exception("a read-only operation failed")
            op.future.set_exception(ApiError(500, f"internal error: {e.__class__.__name__}"))

    def _next_deadline(self) -> float | None:
        return self.engine.next_deadline()

    def _cycle(self, batch: Batch, now: float) -> Any:
        """Hosts, one engine cycle and its decisions into ``batch``; the decisions."""
        self._check_hosts(batch, now)
        if self._replan:
            self._replan = False
            self._apply_plan(self.parsed, batch, reason="hosts changed")
        started = time.perf_counter()
        decisions = self.engine.cycle(now)
        self.last_cycle_seconds = time.perf_counter() - started
        self.cycles += 1
        self.again = decisions.again
        self._record(decisions, batch)
        walltimes.note_started(self, decisions, batch, now)
        batch.fences = resources.fences(self.engine)
        self._enforce_fences(batch)
        self._holdings_into(batch)
        return decisions

    # -- decisions into events and rows ------------------------------------------------
    def _event(self, batch: Batch, client: int, body: dict[str, Any]) -> None:
        body = {"id": self.next_event, **body, "at": self._now}  # the time of the step that decided it
        self.next_event += 1
        batch.events.append((client, body))

    def _alloc_event(self, batch: Batch, rid: str, kind: str, **fields: Any) -> None:
        a = self.allocations.get(int(rid))
        if a is not None:
            self._event(batch, a.client, {"type": kind, "allocation": a.id, **fields})

    def _record(self, d: Decisions, batch: Batch) -> None:
        """The cycle's decisions as events, in the order they took effect: what was lost
        and taken first, then what was granted (so no client ever reads more than it holds)."""
        self._removals(d.lost, batch, "lost")
        self._removals(d.removals, batch, "removed")
        for r in d.cancelled:
            self._alloc_event(batch, r.request, "reclaim_cancelled", host=r.host, slots=r.slots)
        granted: dict[tuple[str, str], int] = {}
        for g in d.grants:
            granted[(g.request, g.host)] = granted.get((g.request, g.host), 0) + g.slots
        for (rid, host), n in granted.items():
            self._alloc_event(batch, rid, "granted", host=host, slots=n)
        for r in d.reclaims:
            self._alloc_event(batch, r.request, "reclaim", host=r.host, slots=r.slots, deadline=r.deadline,
                              **{"for": r.beneficiary, "reason": r.reason})
        batch.decisions = d

    def _removals(self, removals: list[Removal], batch: Batch, kind: str) -> None:
        for r in removals:
            self._alloc_event(batch, r.request, kind, host=r.host, slots=r.slots, reason=r.reason)

    def _holdings_into(self, batch: Batch) -> None:
        e = self.engine
        if e.state is not self._state_seen:  # a new plan or new owned hosts: the state was rebuilt
            self._state_seen = e.state
            batch.holdings_full = [(a.id, self._holding(a)) for a in resources.allocations(e)]
            e.state.changed, e.kinds.changed = set(), set()
            batch.kind_slots = dict.fromkeys(self.kind_slots, 0) | resources.kind_slots(e)
        else:
            for aid, a in resources.changed(e):
                batch.holdings[aid] = None if a is None else self._holding(a)
            batch.kind_slots = resources.kind_slots_changed(e, self.kind_slots)

    @staticmethod
    def _holding(a: Allocation) -> HoldingPub:
        r = a.reclaim
        return HoldingPub(int(a.request), a.group, a.host, a.slots, a.source,
                          r.deadline if r else None, r.beneficiary if r else None, r.reason if r else None,
                          kind=isinstance(a, KindAlloc))

    def _enforce_fences(self, batch: Batch) -> None:
        """Slots that left an allocation while its processes still use them: stop just
        enough of its activities on that host, newest first (SIGTERM, then SIGKILL after
        kill_grace); the slots are free once the agent reports them gone."""
        for (rid, host), fence in batch.fences.items():
            if fence[0] <= 0:
                continue
            held = resources.held_on(self, int(rid), host)
            acts = sorted(self._live(int(rid), host), key=lambda a: -a.id)
            running = sum(a.slots for a in acts if not a.stop)
            for a in acts:
                if running <= held:
                    break
                if not a.stop:
                    self._stop(a, "reclaimed", batch)
                    running -= a.slots

    def _live(self, alloc: int, host: str) -> list[ActivityPub]:
        """The allocation's starting or running activities on ``host``."""
        return [a for a in self.live_on.get(host, {}).values() if a.allocation == alloc]

    def _stop(self, a: ActivityPub, reason: str, batch: Batch) -> None:
        a.stop = True
        a.stop_reason = reason
        batch.activities[a.id] = a
        batch.wake_hosts.add(a.host)

    # -- publishing -------------------------------------------------------------------
    def _publish_holdings_full(self, holdings: list[tuple[int, HoldingPub]]) -> None:
        """Every holding anew (at start, and after the engine's state was rebuilt)."""
        self.holdings = {}
        for a in self.allocations.values():
            a.hosts, a.reclaiming, a.held = {}, {}, 0
        self.host_used = {}
        self.kind_used = {}
        for hid, h in holdings:
            self._put_holding(hid, h)

    def _put_holding(self, hid: int, h: HoldingPub | None) -> None:
        old = self.holdings.pop(hid, None)
        if old is not None:
            a = self.allocations.get(old.request)
            if a is not None:
                left = a.hosts.get(old.host, 0) - old.slots
                if left > 0:
                    a.hosts[old.host] = left
                else:
                    a.hosts.pop(old.host, None)
                a.held -= old.slots
                a.reclaiming.pop(hid, None)
            self.host_used[old.host] = self.host_used.get(old.host, 0) - old.slots
            if old.kind:
                self.kind_used[old.host] = self.kind_used.get(old.host, 0) - old.slots
        if h is not None:
            self.holdings[hid] = h
            a = self.allocations.get(h.request)
            if a is not None:
                a.hosts[h.host] = a.hosts.get(h.host, 0) + h.slots
                a.held += h.slots
                if h.deadline is not None:
                    a.reclaiming[hid] = h
            self.host_used[h.host] = self.host_used.get(h.host, 0) + h.slots
            if h.kind:
                self.kind_used[h.host] = self.kind_used.get(h.host, 0) + h.slots

    def _publish(self, batch: Batch) -> None:
        if batch.plan is not None:
            self.plan_version, self.plan_text, self.plan_by, self.plan_at = batch.plan
        if batch.holdings_full is not None:
            self._publish_holdings_full(batch.holdings_full)
        for hid, h in batch.holdings.items():
            self._put_holding(hid, h)
        self.fences = batch.fences
        for host, n in (batch.kind_slots or {}).items():  # what changed (0: none now)
            if n:
                self.kind_slots[host] = n
            else:
                self.kind_slots.pop(host, None)
        for client, body in batch.events:
            recent = self.recent_events.setdefault(client, [])
            recent.append(body)
            if len(recent) > 2 * RECENT_EVENTS:
                self.recent_floor[client] = recent[-RECENT_EVENTS - 1]["id"]
                del recent[:-RECENT_EVENTS]
            w = self.event_waiters.pop(client, None)
            if w is not None:
                w.set()
        for host in batch.wake_hosts:
            w = self.host_waiters.pop(host, None)
            if w is not None:
                w.set()

    def quotas_named(self) -> dict[str, quotas.Quota]:
        """The quotas the plan in force names (service/quotas.py)."""
        return quotas.named(self.parsed.data)

    def valid_consumer(self, consumer: str) -> bool:
        """Whether a consumer token may be scoped to ``consumer``."""
        return consumer in self.consumers

    def free_on(self, host: str) -> int:
        return resources.free_on(self, host)

    # -- hosts ------------------------------------------------------------------------
    def _missed_limit(self) -> int:
        """Heartbeats a host's agent may miss before the host is unreachable (DUCC: down; node stability)."""
        return self.settings.missed

    def _check_hosts(self, batch: Batch, now: float) -> None:
        """Hosts whose agent missed too many heartbeats are unreachable, then down (hoststates.py)."""
        hoststates.check(self, batch, now)

    def _set_state(self, h: HostPub, state: str, batch: Batch) -> None:
        h.state = state
        batch.hosts[h.name] = h
        self._engine_host_state(h.name, state)
        if state == "down":
            for a in list(self.live_on.get(h.name, {}).values()):
                self._end(a, "lost", None, None, batch, time.time())

    def _engine_host_state(self, name: str, state: str) -> None:
        if name in self.engine.state.hosts:  # down: what may still run there stays fenced
            self.engine.set_host_state(name, HostState(state), keep_in_use=True)

    def _end(self, a: ActivityPub, state: str, exit_code: int | None, signal: int | None, batch: Batch,
             now: float) -> None:
        a.state, a.exit_code, a.signal, a.ended_at = state, exit_code, signal, now
        if self.live_on.get(a.host, {}).pop(a.id, None) is not None:
            self.quota.activity_ended(self.allocations.get(a.allocation), a.allocation)
        batch.activities[a.id] = a
        self._event(batch, a.client, {"type": "activity", "allocation": a.allocation, "host": a.host,
                                      "activity": a.id, "state": state, "exit_code": exit_code,
                                      "signal": signal, "slots": a.slots, **self._activity_fields(a)})
        self._ended(a, batch)

    def _activity_fields(self, a: ActivityPub) -> dict[str, Any]:
        """What an activity's events say beside the common fields: who ran it, its limits and
        usage, at its end why and whether OOM (DUCC: also its job)."""
        return execution.event_fields(a)

    def _ended(self, a: ActivityPub, batch: Batch) -> None:
        """An activity ended (its slots are free once it is gone)."""
        self._in_use(a.allocation, a.host)

    def _in_use(self, alloc: int, host: str) -> None:
        """What the allocation's processes use on ``host``: its live activities, and those
        lost with the host that may still run there (hoststates.py)."""
        used = sum(x.slots for x in self._live(alloc, host)) + hoststates.orphan_slots(self, alloc, host)
        resources.set_in_use(self, alloc, host, used)

    # -- operations (each runs inside the task) --------------------------------------------
    def op_register_client(self, name: str, consumer: str) -> Callable[[Batch, float], ClientPub]:
        def run(batch: Batch, now: float) -> ClientPub:
            cid = self.client_names.get((consumer, name))
            if cid is not None:  # registering again: the same client (the same name elsewhere is another)
                return self.clients[cid]
            if consumer != "/" and not self.valid_consumer(consumer):
                raise ApiError(422, f"consumer: {consumer} is not a consumer of the plan in force")
            quotas.check_client(self, consumer)
            c = ClientPub(self._next_client, name, consumer, now)
            self._next_client += 1
            self.clients[c.id] = c
            self.client_names[(consumer, name)] = c.id
            self.quota.clients.add(consumer)
            batch.clients.append(c)
            return c
        return run

    def check_allocation(self, consumer: str, groups: list[str], mn: int, mx: int, order: int,
                         requirement: str | None) -> None:
        """Everything about a new allocation that the plan in force decides (422 if wrong)."""
        c = self.consumers.get(consumer)
        if c is None:
            raise ApiError(422, f"consumer: {consumer} is not a consumer of the plan in force")
        if not c.is_leaf:
            raise ApiError(422, f"consumer: {consumer} is not a leaf consumer (it has children)")
        for g in groups:
            if g not in self.group_names:
                raise ApiError(422, f"group: {g} is not a resource group of the plan in force")
            if g not in c.groups:
                raise ApiError(422, f"group: {consumer} is not planned in resource group {g}")
        if not groups and not c.groups:
            raise ApiError(422, f"group: {consumer} is planned in no resource group")
        if mn > mx:
            raise ApiError(422, f"min: {mn} is more than max {mx}")
        if mn % order or mx % order:
            raise ApiError(422, f"slots_per_instance: min and max must be multiples of {order}")
        if requirement:
            try:
                parse_requirement(requirement)
            except ValueError as e:
                raise ApiError(422, f"requirement: {e}") from None

    def op_create_allocation(self, client: int, consumer: str, groups: list[str], mn: int, mx: int,
                             order: int, exclusive: bool, requirement: str | None, memory: float | None = None,
                             resources_asked: dict[str, Any] | None = None,
                             walltime: float | None = None) -> Callable[[Batch, float], AllocationPub]:
        def run(batch: Batch, now: float) -> AllocationPub:
            if client not in self.clients:
                raise ApiError(422, f"client: no client {client}")
            if not in_subtree(consumer, self.clients[client].consumer):
                raise ApiError(403, f"consumer: client {client} is registered under "
                                    f"{self.clients[client].consumer}, not above {consumer}")
            self.check_allocation(consumer, groups, mn, mx, order, requirement)
            why = resources.check(exclusive, resources_asked)
            if why is not None:
                raise ApiError(422, why)
            quotas.check_allocation(self, consumer, mx)
            a = AllocationPub(self._next_alloc, client, consumer, groups, mn, mx, order, exclusive, requirement,
                              [], self._seq, now, memory, resources=resources_asked,
                              walltime=walltime)
            self.engine.submit(self._request(a))
            self._next_alloc += 1
            self._seq += 1
            self.allocations[a.id] = a
            self.quota.allocation_added(a)
            batch.allocations[a.id] = a
            return a
        return run

    def _alloc(self, aid: int) -> AllocationPub:
        return _found(self.allocations, aid, "allocation")

    def op_change_allocation(self, aid: int, mn: int | None, mx: int | None
                             ) -> Callable[[Batch, float], AllocationPub]:
        def run(batch: Batch, now: float) -> AllocationPub:
            a = self._alloc(aid)
            new_min = a.min if mn is None else mn
            new_max = a.max if mx is None else mx
            if new_min > new_max:
                raise ApiError(422, f"min: {new_min} is more than max {new_max}")
            if new_min % a.order or new_max % a.order:
                raise ApiError(422, f"max: min and max must be multiples of slots_per_instance {a.order}")
            quotas.check_allocation(self, a.consumer, new_max, a.max, new=False)
            self.engine.change(str(aid), min=new_min, max=new_max)
            old = a.max
            a.min, a.max = new_min, new_max
            self.quota.max_changed(a, old)
            batch.allocations[aid] = a
            return a
        return run

    def op_release(self, aid: int, hosts: list[str] | None, blocked: bool,
                   slots: dict[str, int] | None = None) -> Callable[[Batch, float], AllocationPub]:
        def run(batch: Batch, now: float) -> AllocationPub:
            a = self._alloc(aid)
            if slots:
                for host, n in slots.items():
                    held = resources.held_on(self, aid, host)
                    if n > held:
                        raise ApiError(422, f"slots: allocation {aid} holds {held} on {host}, not {n}")
                    if n % a.order:
                        raise ApiError(422, f"slots: {n} on {host} is not whole instances of {a.order}")
            if hosts is None and slots:
                resources.release_hosts(self, a, (), blocked, slots)
                if blocked:
                    a.blocked = sorted(set(a.blocked) | set(slots))
            elif hosts is None:
                # all of it: every slot goes back and the demand ends (min = max = 0);
                # the allocation stays until deleted, and PATCH may ask again
                self.engine.change(str(aid), min=0, max=0)
                old = a.max
                a.min = a.max = 0
                self.quota.max_changed(a, old)
            else:
                unknown = [h for h in hosts if h not in self.hosts and h not in self.engine.state.hosts]
                if unknown:
                    raise ApiError(422, f"hosts: unknown host {unknown[0]}")
                resources.release_hosts(self, a, hosts, blocked, slots)
                if blocked:
                    a.blocked = sorted(set(a.blocked) | set(hosts) | set(slots or ()))
            batch.allocations[aid] = a
            return a
        return run

    def op_delete(self, aid: int) -> Callable[[Batch, float], None]:
        def run(batch: Batch, now: float) -> None:
            a = self._alloc(aid)  # 404 when there is none
            self.engine.release(str(aid))
            del self.allocations[aid]
            self.quota.allocation_gone(a)
            batch.deleted_allocations.append(aid)
            for on in self.live_on.values():
                for act in on.values():
                    if act.allocation == aid and not act.stop:
                        self._stop(act, "allocation deleted", batch)
            return None
        return run

    def op_start_activity(self, aid: int, host: str, argv: list[str], env: dict[str, str], cwd: str | None,
                          slots: int) -> Callable[[Batch, float], ActivityPub]:
        def run(batch: Batch, now: float) -> ActivityPub:
            a = self._alloc(aid)
            held = resources.held_on(self, aid, host)
            if held == 0:
                raise ApiError(422, f"host: allocation {aid} holds nothing on {host}")
            used = sum(x.slots for x in self._live(aid, host))
            if used + slots > held:
                raise ApiError(422, f"slots: {slots} more on {host} would make {used + slots}; "
                                    f"allocation {aid} holds {held} there")
            quotas.check_activity(self, a.consumer)
            try:
                held_devices = devices.assign(self.hosts.get(host), self.live_on.get(host, {}).values(), a, slots,
                                              prefer=resources.engine_devices(self, aid, host))
            except devices.NotEnough as e:
                raise ApiError(409, f"host: {e}") from None
            act = ActivityPub(self._next_activity, aid, a.client, host, argv, env, cwd, slots, "starting", now,
                              devices=held_devices)
            self._next_activity += 1
            self.activities[act.id] = act
            self.live_on.setdefault(host, {})[act.id] = act
            self.quota.activity_started(a, aid)
            batch.activities[act.id] = act
            batch.wake_hosts.add(host)
            self._event(batch, a.client, {"type": "activity", "allocation": aid, "host": host, "activity": act.id,
                                          "state": "starting", "exit_code": None, "signal": None, "slots": slots})
            self._in_use(aid, host)
            return act
        return run

    def op_kill_activity(self, act_id: int, by: str | None = None) -> Callable[[Batch, float], ActivityPub]:
        def run(batch: Batch, now: float) -> ActivityPub:
            act = _found(self.activities, act_id, "activity")
            if act.live and not act.stop:
                self._stop(act, f"killed by request of {by}" if by else "killed by request", batch)
            return act
        return run

    def _host(self, name: str) -> HostPub:
        return _found(self.hosts, name, "host")

    def op_close_host(self, name: str, reclaim: bool) -> Callable[[Batch, float], HostPub]:
        def run(batch: Batch, now: float) -> HostPub:
            h = self._host(name)
            h.closed = True
            batch.hosts[name] = h
            if h.state == "ok":
                self._set_state(h, "closed", batch)
            if reclaim:
                self._take_back(name, batch)
            return h
        return run

    def _take_back(self, name: str, batch: Batch) -> None:
        """Close with reclaim: every allocation gives back what it holds on ``name``."""
        for rid in resources.holders_on(self.engine, name):
            a = self.allocations.get(int(rid))
            if a is None:
                continue
            gone = resources.release_hosts(self, a, [name], False)
            self._alloc_event(batch, rid, "removed", host=name, slots=gone, reason="host closed with reclaim")

    def op_open_host(self, name: str) -> Callable[[Batch, float], HostPub]:
        def run(batch: Batch, now: float) -> HostPub:
            h = self._host(name)
            h.closed, h.closed_reason = False, None
            batch.hosts[name] = h
            if h.state == "closed":
                self._set_state(h, "ok", batch)
            return h
        return run

    def op_apply_plan(self, text: str, by: str) -> Callable[[Batch, float], int]:
        def run(batch: Batch, now: float) -> int:
            try:
                parsed = liveplan.parse(text, "<plan>")
                _not_ducc(parsed)
                liveplan.compile_live(parsed, self._reported())
            except PlanError as e:
                raise ApiError(422, [{"line": p.line, "field": p.field, "msg": p.reason} for p in e.problems]) from None
            self._apply_plan(parsed, batch, reason="plan change")
            version = self.plan_version + 1
            batch.plan = (version, text, by, now)
            return version
        return run

    def diff_plan(self, text: str) -> dict[str, Any]:
        """What ``text`` would reclaim or remove now: the new plan run on a copy of the
        live state, one cycle at the present time. Read-only: the live engine is not touched."""
        try:
            parsed = liveplan.parse(text, "<plan>")
            _not_ducc(parsed)
            plan = liveplan.compile_live(parsed, self._reported())
        except PlanError as e:
            raise ApiError(422, [{"line": p.line, "field": p.field, "msg": p.reason} for p in e.problems]) from None
        rebuilt = rebuild(self.engine.state, plan)  # the new plan's state, built aside: the live one is not touched
        shadow = Engine.over(rebuilt.state)
        shadow.state.changed = None
        removed = rebuilt.removed
        d = shadow.cycle(time.time())
        return {
            "removed": [r._asdict() for r in removed + d.removals],
            "reclaims": [r._asdict() for r in d.reclaims],
            "grants": [g._asdict() for g in d.grants],
        }

    def _apply_plan(self, parsed: liveplan.ParsedPlan, batch: Batch, reason: str) -> None:
        try:
            plan = liveplan.compile_live(parsed, self._reported())
        except PlanError as e:
            log.error("%s: the plan in force no longer compiles with the hosts reported: %s", reason, e)
            return
        removed = self.engine.apply_plan(plan)
        # a new plan keeps the engine's host states; the hosts' own word is newer
        for name, ledger in self.engine.state.hosts.items():
            h = self.hosts.get(name)
            if h is not None and ledger.state.value != h.state:
                removed += self.engine.set_host_state(name, HostState(h.state), keep_in_use=True)
        self.plan = plan
        self.consumers = plan.consumer_map()
        self.group_names = {g.name for g in plan.groups}
        self.parsed = parsed
        self._removals(removed, batch, "removed")
        for aid in [i for i in self.allocations if not resources.is_open(self.engine, i)]:
            a = self.allocations.pop(aid)
            self.quota.allocation_gone(a)
            batch.deleted_allocations.append(aid)
            for on in self.live_on.values():
                for act in on.values():
                    if act.allocation == aid and not act.stop:
                        self._stop(act, reason, batch)
            log.warning("allocation %s ended by %s: %s is not a leaf consumer any more", aid, reason, a.consumer)

    # -- agents -----------------------------------------------------------------------
    def op_agent_register(self, name: str, slots: int, memory: float, os_name: str, attributes: dict[str, Any],
                          running: list[int], agent: dict[str, Any] | None = None
                          ) -> Callable[[Batch, float], HostPub]:
        def run(batch: Batch, now: float) -> HostPub:
            had = self.hosts.get(name)
            before = resources.host_vector(had) if had is not None else None
            h, changed = self._reported_host(name, slots, memory, os_name, attributes, batch, now, agent)
            if agent is not None and "resources" in agent:
                h.resources = agent["resources"]  # its vector (resources.py) and devices (devices.py)
                changed = changed or resources.host_vector(h) != before
            if changed:
                h.state = "closed" if h.closed else "ok"
                h.unreachable_since = None
                self._replan = True
            if h.state in hoststates.SILENT or name not in self.engine.state.hosts or \
                    self.engine.state.hosts[name].state is HostState.DOWN:
                if not self._replan:
                    if not hoststates.heard(self, h, batch):
                        self._set_state(h, "closed" if h.closed else "ok", batch)
                else:
                    h.state, h.unreachable_since = ("closed" if h.closed else "ok"), None
            hoststates.registered(self, name, running)  # what was lost there and is gone
            self._reconcile(name, running, batch, now)
            return h
        return run

    def _reported_host(self, name: str, slots: int, memory: float, os_name: str, attributes: dict[str, Any],
                       batch: Batch, now: float, agent: dict[str, Any] | None = None) -> tuple[HostPub, bool]:
        """The host as its agent reports it (new, or with its facts updated); whether its facts changed."""
        h = self.hosts.get(name)
        changed = h is None or (h.slots, h.memory, h.attributes) != (slots, memory, attributes)
        if h is None:
            h = self.hosts[name] = HostPub(name, slots, memory, os_name, attributes, "ok", False, now, True)
        elif changed:
            h.slots, h.memory, h.os, h.attributes = slots, memory, os_name, attributes
        h.last_seen, h.reported = now, True
        execution.agent_facts(h, (agent or {}).get("containment"), (agent or {}).get("run_as"))
        batch.hosts[name] = h
        return h, changed

    def _reconcile(self, name: str, running: list[int], batch: Batch, now: float) -> None:
        """What the master has running on ``name`` that its agent no longer runs has ended."""
        listed = set(running)
        for a in list(self.live_on.get(name, {}).values()):
            if a.state == "running" and a.id not in listed:
                self._end(a, "exited", None, None, batch, now)

    def op_agent_reports(self, name: str, reports: list[dict[str, Any]]) -> Callable[[Batch, float], None]:
        def run(batch: Batch, now: float) -> None:
            h = self.hosts.get(name)
            if h is None:
                raise ApiError(404, f"host {name} is not registered: register first")
            hoststates.heard(self, h, batch)
            hoststates.reported(self, name, reports)  # what was lost there and is gone
            for r in reports:
                a = self.activities.get(r["id"])
                if a is None or a.host != name:
                    continue
                self.start_failures.note(name, a.state, r, now)  # a host where starts keep failing says so
                execution.report_into(self, h, a, r, batch)  # who, limits, usage; why it ended; unkillable
                if r.get("stdout") is not None:
                    a.stdout = r["stdout"][-self.settings.output_lines:]
                if r.get("stderr") is not None:
                    a.stderr = r["stderr"][-self.settings.output_lines:]
                state = r["state"]
                if state == "running" and a.state == "starting":
                    a.state, a.pid = "running", r.get("pid")
                    batch.activities[a.id] = a
                    self._event(batch, a.client, {"type": "activity", "allocation": a.allocation, "host": name,
                                                  "activity": a.id, "state": "running", "exit_code": None,
                                                  "signal": None, "slots": a.slots, **self._activity_fields(a)})
                elif state in execution.ENDING and a.live:
                    self._end(a, state, r.get("exit_code"), r.get("signal"), batch, now)
            listed = {r["id"] for r in reports}
            for a in list(self.live_on.get(name, {}).values()):
                if a.state == "starting" and a.stop and a.id not in listed:
                    self._end(a, "killed", None, None, batch, now)  # stopped before it was started
            return None
        return run

    def reports_change(self, name: str, reports: list[dict[str, Any]]) -> bool:
        """Whether an agent's heartbeat tells the master anything new (else no batch is needed)."""
        h = self.hosts.get(name)
        if h is None or h.state in hoststates.SILENT or hoststates.reports_change(self, name, reports):
            return True
        listed = set()
        for r in reports:
            listed.add(r["id"])
            a = self.activities.get(r["id"])
            if a is None or a.host != name:
                continue
            if (r["state"] == "running" and a.state == "starting") or (r["state"] != "running" and a.live):
                return True
            if (r.get("stdout") is not None and r["stdout"] != a.stdout) or \
                    (r.get("stderr") is not None and r["stderr"] != a.stderr):
                return True
        return any(a.state == "starting" and a.stop and a.id not in listed
                   for a in self.live_on.get(name, {}).values())

    def op_report(self) -> Callable[[Batch, float], Any]:
        def run(batch: Batch, now: float) -> Any:
            return self.engine.report()
        run.read_only = True  # type: ignore[attr-defined]
        return run

    def op_diff_plan(self, text: str) -> Callable[[Batch, float], dict[str, Any]]:
        def run(batch: Batch, now: float) -> dict[str, Any]:
            return self.diff_plan(text)
        run.read_only = True  # type: ignore[attr-defined]
        return run

    def commands_for(self, name: str, listed: dict[int, str]) -> list[dict[str, Any]]:
        """What the agent of ``name`` is to do, from what it lists (activity -> state)."""
        out: list[dict[str, Any]] = []
        live = self.live_on.get(name, {})
        for act_id, state in listed.items():
            a = live.get(act_id)
            if a is None:
                if state == "running":
                    out.append({"op": "stop", "activity": act_id, "kill_grace": self.settings.kill_grace})
                else:
                    out.append({"op": "forget", "activity": act_id})
            elif a.stop and state == "running":
                out.append({"op": "stop", "activity": act_id, "kill_grace": self.settings.kill_grace})
        starts = 0
        for a in live.values():
            if a.state == "starting" and a.id not in listed and not a.stop:
                if starts == START_BATCH:
                    break  # the rest in the next answer: the agent's heartbeats go on between batches
                starts += 1
                env = {**a.env, **self._start_env(a)}
                start = {"op": "start", "activity": a.id, "allocation": a.allocation, "argv": a.argv,
                         "env": env, "cwd": a.cwd, "slots": a.slots, **self._start_extra(a)}
                out.append(devices.start_command(start, a, self.hosts.get(name), self.allocations.get(a.allocation)))
        return out

    def _start_extra(self, a: ActivityPub) -> dict[str, Any]:
        """The execution user and limits of a start command (service/execution.py)."""
        return execution.ego_start(self, a)

    def _start_env(self, a: ActivityPub) -> dict[str, str]:
        """What the master adds to an activity's environment when it starts."""
        return {"APPORTION_ALLOCATION": str(a.allocation), "APPORTION_HOST": a.host,
                "APPORTION_SLOTS": str(a.slots), "APPORTION_ACTIVITY": str(a.id)}
