"""``ApportionCluster``: a Dask cluster whose workers run on slots an apportion master grants.

The cluster is a tenant of the master like any application manager
(examples/service/keep_workers.py): it registers a client, holds one allocation under
its consumer, and runs one Dask worker (an activity, ``python -m apportion.dask.worker``)
on every ``worker_slots`` slots it is granted. The scheduler runs in this process, on
the cluster's event loop, as ``LocalCluster``'s does.

The master decides which slots the cluster holds; the cluster decides how many it
asks for. So it is built on ``distributed.deploy.Cluster`` (not ``SpecCluster``, whose
workers exist because the cluster says so): ``scale(n)`` and Dask's adaptive target
set the allocation's ``max`` (``n * worker_slots``), ``adapt(minimum=m)`` its ``min``,
and workers start as grants arrive.

Giving back is always by retirement: the scheduler moves a worker's data to others
(``retire_workers``), the worker closes and its process exits by itself, and only then
are its slots released, exactly (``release(slots={host: n})``). A ``reclaim`` is honoured
so before its deadline; a ``lost`` host loses its workers, and Dask recomputes what
they held. ``close()`` closes the workers and ends the allocation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distributed.core import Status, rpc
from distributed.deploy.cluster import Cluster
from distributed.scheduler import Scheduler

from apportion.client import ApportionError, AsyncClient, master_urls, resources_of
from apportion.dask.adaptive import ApportionAdaptive
from apportion.dask.books import Books, DaskWorker
from apportion.dask.net import scheduler_host_for

log = logging.getLogger("apportion.dask")

LEAN_WORKER_ENV: dict[str, str] = {
    # many workers share few cores: no statistical profiler thread sampling every 10 ms,
    # and the event-loop health check and system monitors less often than Dask's defaults
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "2s",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
}
"""Set in every worker's environment unless ``worker_env`` says otherwise."""

TICK = 0.5  # seconds: how long the manager waits for an event before looking again
RESYNC = 5.0  # seconds: the allocation is read again at least this often, events or not


@dataclass
class ReclaimRecord:
    """One reclaim, as the cluster honoured it (``ApportionCluster.reclaims``)."""

    host: str
    slots: int
    deadline: float  # Unix seconds
    beneficiary: str | None
    received_at: float  # Unix seconds
    workers: list[str] = field(default_factory=list)  # the workers retired for it
    released_at: float | None = None  # when the slots were released (Unix seconds)
    released: int = 0
    forced: list[str] = field(default_factory=list)  # workers that had to be stopped by a signal
    taken: int = 0  # slots the master took at the deadline (``removed``) instead

    @property
    def in_time(self) -> bool:
        """Given back before the deadline, nothing taken by force."""
        return self.released_at is not None and self.released_at <= self.deadline and self.taken == 0


class ApportionCluster(Cluster):
    """A Dask cluster on an apportion master: workers on the slots of one allocation.

    ``consumer``: the leaf consumer to run as; ``group``: its resource group(s) (default:
    the consumer's groups). ``worker_slots``: slots per worker (the allocation's
    ``slots_per_instance``); each worker runs ``nthreads`` threads (default
    ``worker_slots``). ``n_workers``: workers to ask for at once; ``minimum``: the floor
    (the allocation's ``min``) that ``scale`` keeps until ``adapt`` sets another.

    ``master``, ``token``, ``token_file``: as for ``apportion.client.Client`` (default
    ``APPORTION_MASTER``, ``APPORTION_TOKEN``, ``APPORTION_TOKEN_FILE``). ``client_name``:
    the name registered with the master (default: unique to this cluster).

    ``scheduler_host``: where the scheduler listens; the workers' hosts must reach it
    (default: loopback for a master on loopback, else this machine's address towards
    the master). ``python``: the interpreter on the agents' hosts (default this one);
    ``worker_env``: extra environment for the workers (over ``LEAN_WORKER_ENV``).
    ``retire_margin``: seconds before a reclaim's deadline by which the slots are
    released (workers still there then are stopped). ``scale_timeout``: how long a
    scale-down waits for workers to retire before stopping them.

    ``resources``: what each slot needs, ``{"cores": 8, "memory": 64, "gpus": 1,
    "gpu_model": "A100"}`` (memory in GB; ``gpus: 0.5`` shares a device): a worker of
    ``worker_slots`` slots gets that many times it, and sees only its GPUs
    (``CUDA_VISIBLE_DEVICES``, set by the agent).
    """

    def __init__(self, consumer: str, group: str | Sequence[str] | None = None, *, worker_slots: int = 1,
                 n_workers: int = 0, minimum: int = 0, master: str | Sequence[str] | None = None,
                 token: str | None = None, token_file: str | os.PathLike[str] | None = None,
                 client_name: str | None = None, nthreads: int | None = None, memory_limit: str | int = "auto",
                 scheduler_host: str | None = None, scheduler_port: int = 0, python: str | None = None,
                 worker_env: Mapping[str, str] | None = None, worker_death_timeout: float = 60.0,
                 retire_margin: float = 2.0, scale_timeout: float = 30.0, asynchronous: bool = False,
                 loop: Any = None, quiet: bool = True, name: str | None = None,
                 resources: Mapping[str, Any] | None = None) -> None:
        if worker_slots < 1:
            raise ValueError(f"worker_slots must be 1 or more, not {worker_slots}")
        if n_workers < 0 or minimum < 0:
            raise ValueError("n_workers and minimum must be 0 or more")
        if nthreads is not None and nthreads < 1:
            raise ValueError(f"nthreads must be 1 or more, not {nthreads}")
        self.resources = resources_of(resources) if resources is not None else None
        super().__init__(asynchronous=asynchronous, loop=loop, quiet=quiet, name=name)
        self.consumer = consumer
        self.group = group
        self.worker_slots = worker_slots
        self._masters = master_urls(master)
        self._token, self._token_file = token, token_file
        self.client_name = client_name or f"dask-{socket.gethostname()}-{os.getpid()}-{self.name}"
        self._nthreads = nthreads or worker_slots
        self._memory_limit = memory_limit
        self._scheduler_host = scheduler_host
        self._scheduler_port = scheduler_port
        self._python = python or sys.executable
        self._worker_env = {**LEAN_WORKER_ENV, **(worker_env or {})}
        self._death_timeout = worker_death_timeout
        self._retire_margin = retire_margin
        self._scale_timeout = scale_timeout
        self._wanted = n_workers
        self._minimum = minimum
        self._asked: tuple[int, int] | None = None  # (min, max) last sent to the master
        self.books = Books(worker_slots)
        self.reclaims: list[ReclaimRecord] = []
        self.lost: list[dict[str, Any]] = []  # {"host", "slots", "at", "workers"} per lost or removed holding
        self.scheduler: Scheduler | None = None
        self.allocation_id: int | None = None
        self.client_id: int | None = None
        self._api: AsyncClient | None = None
        self._manager: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._dirty = True
        self._changed: asyncio.Event | None = None
        if not self.called_from_running_loop:
            self._loop_runner.start()
            try:
                self.sync(self._start)
            except BaseException:
                with contextlib.suppress(Exception):
                    self.sync(self._close)
                self._loop_runner.stop()
                raise

    # -- life ------------------------------------------------------------------------------
    def __await__(self):  # type: ignore[override]
        async def _() -> ApportionCluster:
            if self.status == Status.created:
                await self._start()
            return self

        return _().__await__()

    async def _start(self) -> None:
        if self.status != Status.created:
            return
        self.status = Status.starting
        self._lock = asyncio.Lock()  # reading the allocation and acting on it, one at a time
        self._scaling = asyncio.Lock()  # one scale or adaptive step at a time
        self._changed = asyncio.Event()
        host = self._scheduler_host or scheduler_host_for(self._masters)
        self.scheduler = await Scheduler(host=host, port=self._scheduler_port, dashboard=False,
                                         dashboard_address=f"{host}:0")
        self._api = AsyncClient(self._masters, token=self._token, token_file=self._token_file)
        try:
            self.client_id = await self._api.register(self.client_name, self.consumer)
            alloc = await self._api.allocate(self.consumer, self.group, *self._demand(self._wanted),
                                             client=self.client_id, slots_per_instance=self.worker_slots,
                                             resources=self.resources)
        except ApportionError as e:
            await self._api.aclose()
            await self.scheduler.close()
            self._api, self.scheduler = None, None
            raise RuntimeError(f"ApportionCluster: no allocation for {self.consumer}: {e}") from e
        self.allocation_id = int(alloc["id"])
        self._asked = self._demand(self._wanted)
        self.scheduler_comm = rpc(self.scheduler.address)
        await super()._start()
        self._manager = asyncio.ensure_future(self._manage())
        self._manager.add_done_callback(self._task_done)
        self._log(f"allocation {self.allocation_id} of {self.consumer} on {self._api.master}; "
                  f"scheduler at {self.scheduler.address}")

    def close(self, timeout: float | None = None) -> Any:
        aw = super().close(timeout)
        if not self.asynchronous:
            self._loop_runner.stop()
        return aw

    async def _close(self) -> None:
        if self.status in (Status.closed, Status.closing):
            return
        self.status = Status.closing
        with contextlib.suppress(AttributeError):
            self._adaptive.stop(reason="cluster closing")
        try:
            if self._api is not None and self.allocation_id is not None:
                await self._close_workers()
                with contextlib.suppress(ApportionError):
                    await self._api.delete(self.allocation_id)  # every slot back; the master stops what is left
        finally:
            if self._manager is not None:
                self._manager.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._manager
            for task in list(self._tasks):
                task.cancel()
            if self._api is not None:
                await self._api.aclose()
            await super()._close()
            if self.scheduler is not None:
                await self.scheduler.close()

    async def _close_workers(self, timeout: float = 10.0) -> None:
        """Close every worker gracefully (its process exits by itself) and wait for the ends;
        no new worker starts meanwhile. Those not gone by ``timeout`` are left to the
        allocation's end (the master stops them)."""
        assert self.scheduler is not None
        self._wanted = 0
        told: set[int] = set()
        end = time.monotonic() + timeout
        while self.books.live() and time.monotonic() < end:
            for w in self.books.live():
                w.retiring = w.retiring or "close"
                if w.address is not None and w.activity not in told:
                    told.add(w.activity)
                    self.scheduler.close_worker(w.address)
            await self._wait_change(min(TICK, end - time.monotonic()))

    # -- the manager: events in, the allocation read, workers started ---------------------
    async def _manage(self) -> None:
        assert self._api is not None and self.client_id is not None
        last_sync = 0.0
        async with self._api.events(self.client_id) as stream:
            while True:
                for e in await self._next_events(stream):
                    self._on_event(e)
                now = time.monotonic()
                wake = any(t <= now for t in self.books.quiet_hosts(now - TICK).values())
                if self._dirty or wake or now - last_sync >= RESYNC:
                    self._dirty = False
                    last_sync = now
                    try:
                        await self._reconcile()
                    except ApportionError as e:
                        if e.status in (401, 403, 404):
                            self._log(f"the master refuses the cluster's allocation: {e}")
                            raise
                        log.warning("ApportionCluster %s: %s; trying again", self.name, e)
                        self._dirty = True
                    except Exception:  # noqa: BLE001 - the manager must outlive one bad round
                        log.exception("ApportionCluster %s: reading the allocation failed; trying again", self.name)
                        self._dirty = True
                        await asyncio.sleep(TICK)
                self._poke()

    @staticmethod
    async def _next_events(stream: Any) -> list[dict[str, Any]]:
        """The events that came within a tick: the first waited for, the rest already there."""
        try:
            events = [await stream.next(timeout=TICK)]
        except TimeoutError:
            return []
        while True:
            try:
                events.append(await stream.next(timeout=0))
            except TimeoutError:
                return events

    def _on_event(self, e: Mapping[str, Any]) -> None:
        if e.get("allocation") != self.allocation_id:
            return
        self._dirty = True
        kind, host = e.get("type"), e.get("host")
        if kind == "activity":
            w = self.books.note_activity(int(e["activity"]), str(e.get("state")), exit_code=e.get("exit_code"),
                                         signal=e.get("signal"), now=time.monotonic())
            if w is not None:
                self._log(f"worker {w.name} on {w.host} ended by itself ({w.state}, exit code {w.exit_code}, "
                          f"signal {w.signal}); another starts there after a pause")
        elif kind in ("lost", "removed"):
            self._on_gone(str(host), int(e.get("slots") or 0), str(kind), e)

    def _on_gone(self, host: str, slots: int, kind: str, e: Mapping[str, Any]) -> None:
        """Slots taken away: a host lost (its workers with it), or a reclaim's deadline passed."""
        workers = [w.name for w in self.books.on(host)]
        self.lost.append({"kind": kind, "host": host, "slots": slots, "at": e.get("at"), "workers": workers,
                          "reason": e.get("reason")})
        self._log(f"{kind}: {slots} slot(s) on {host} ({e.get('reason')}); workers there: {workers}")
        if kind == "removed":
            for rec in self.reclaims:
                if rec.host == host and rec.released_at is None:
                    rec.taken += slots
                    break
        if kind == "lost":
            self.books.forget_host(host)
            for w in self.books.workers.values():
                if w.host != host:
                    continue
                w.retiring = w.retiring or "lost"
                if w.address is not None:  # still connected (only the agent died): let it go gracefully
                    self._spawn(self._retire_at_scheduler([w], why="lost"))

    async def _reconcile(self) -> None:
        """Read the allocation and its activities; honour new reclaims; start workers on
        unused slots."""
        assert self._api is not None and self.allocation_id is not None
        async with self._lock:
            alloc = await self._api.allocation(self.allocation_id)
            acts = await self._api.activities(self.allocation_id)
            now = time.monotonic()
            for a in acts:
                w = self.books.note_activity(int(a["id"]), str(a["state"]), exit_code=a.get("exit_code"),
                                             signal=a.get("signal"), stopping=bool(a.get("stopping")),
                                             stop_reason=a.get("stop_reason"), now=now)
                if w is not None:
                    self._log(f"worker {w.name} on {w.host} ended by itself ({w.state})")
            held: dict[str, int] = {h: int(n) for h, n in (alloc.get("hosts") or {}).items()}
            for r in alloc.get("reclaiming") or []:
                self._take_reclaim(r, held)
            starts = self.books.starts(held, self._wanted, now)
            if starts:
                await asyncio.gather(*(self._start_worker(h) for h, n in starts.items() for _ in range(n)))

    def _take_reclaim(self, r: Mapping[str, Any], held: Mapping[str, int]) -> None:
        host, slots, deadline = str(r["host"]), int(r["slots"]), float(r["deadline"])
        key = (host, deadline)
        if key in self.books.handled:
            return
        self.books.handled.add(key)
        victims = self.books.choose_for_reclaim(host, slots, held.get(host, 0))
        self.books.retire(victims, "reclaim")
        chosen = sum(w.slots for w in victims)
        self.books.give_back(host, slots - chosen)
        rec = ReclaimRecord(host, slots, deadline, r.get("for"), time.time(), [w.name for w in victims])
        self.reclaims.append(rec)
        self._log(f"reclaim: {slots} slot(s) on {host} for {r.get('for')} by "
                  f"{time.strftime('%H:%M:%S', time.localtime(deadline))}; retiring {rec.workers}")
        self._spawn(self._honour(rec, victims, max(slots, chosen)))

    async def _start_worker(self, host: str) -> None:
        assert self._api is not None and self.allocation_id is not None and self.scheduler is not None
        argv = [self._python, "-m", "apportion.dask.worker", self.scheduler.address, "--name-prefix", self.name,
                "--nthreads", str(self._nthreads), "--memory-limit", str(self._memory_limit),
                "--death-timeout", str(self._death_timeout)]
        try:
            act = await self._api.start_activity(self.allocation_id, host, argv, env=self._worker_env,
                                                 slots=self.worker_slots)
        except ApportionError as e:
            if not 400 <= e.status < 500:
                raise
            log.info("ApportionCluster %s: no worker started on %s: %s", self.name, host, e)
            self._dirty = True
            return
        self.books.add(int(act["id"]), f"{self.name}-{act['id']}", host)

    # -- giving back ---------------------------------------------------------------------
    async def _honour(self, rec: ReclaimRecord, victims: list[DaskWorker], giving: int) -> None:
        """Retire the reclaimed slots' workers, then release exactly those slots, before the deadline."""
        assert self._api is not None and self.allocation_id is not None
        left = rec.deadline - time.time()
        until = time.monotonic() + left - min(self._retire_margin, max(0.0, left) * 0.25)
        rec.forced = await self._retire(victims, until, why="reclaim")
        async with self._lock:
            alloc = await self._api.allocation(self.allocation_id)
            held = int((alloc.get("hosts") or {}).get(rec.host, 0))
            # only what is still being reclaimed there: a release meanwhile (a scale-down) may have
            # given the reclaimed slots back already, and a cancelled reclaim wants nothing
            pending = sum(int(r["slots"]) for r in alloc.get("reclaiming") or [] if r["host"] == rec.host)
            n = min(rec.slots, held, pending)
            if n > 0:  # (an empty slots map is refused)
                await self._api.release(self.allocation_id, slots={rec.host: n})
            self.books.released(rec.host, giving)
        rec.released, rec.released_at = n, time.time()
        self._log(f"released {n} slot(s) on {rec.host}, {rec.deadline - rec.released_at:.1f} s before the deadline"
                  + (f"; stopped by signal: {rec.forced}" if rec.forced else ""))
        self._dirty = True

    async def _retire(self, victims: list[DaskWorker], until: float, why: str) -> list[str]:
        """Retire ``victims`` through the scheduler (their data moves to other workers, then
        they close and their processes exit) and wait for their activities to end. A worker
        not yet connected is retired once it connects. At ``until`` those still running are
        stopped (SIGTERM, then SIGKILL after the master's kill grace). -> names stopped so."""
        assert self.scheduler is not None and self._api is not None
        asked: set[int] = set()
        retiring: list[asyncio.Task[None]] = []
        while any(w.live for w in victims):
            ready = [w for w in victims if w.live and w.address is not None and w.activity not in asked]
            if ready:
                asked.update(w.activity for w in ready)
                retiring.append(self._spawn(self._retire_at_scheduler(ready, why)))
            now = time.monotonic()
            if now >= until:
                break
            await self._wait_change(min(TICK, until - now))
        forced = [w for w in victims if w.live]
        for w in forced:
            with contextlib.suppress(ApportionError):
                await self._api.kill_activity(w.activity)
        if forced:
            self._log(f"stopping {[w.name for w in forced]}: not gone by the time their slots are due")
            end = time.monotonic() + 15.0
            while any(w.live for w in forced) and time.monotonic() < end:
                await self._wait_change(TICK)
        for task in retiring:
            task.cancel()
        return [w.name for w in forced]

    async def _retire_at_scheduler(self, workers: list[DaskWorker], why: str) -> None:
        assert self.scheduler is not None
        names = [w.name for w in workers]
        done = await self.scheduler.retire_workers(names=names, close_workers=True, remove=True,
                                                   stimulus_id=f"apportion-{why}-{time.time()}")
        for w in workers:  # no other worker could take its data: close it anyway, Dask recomputes
            if w.address is not None and w.address not in done and w.address in self.scheduler.workers:
                log.info("ApportionCluster %s: %s could not hand over its data; closing it", self.name, w.name)
                self.scheduler.close_worker(w.address)

    # -- scaling -------------------------------------------------------------------------
    def _demand(self, wanted: int) -> tuple[int, int]:
        """The allocation's (min, max) for ``wanted`` workers."""
        return min(self._minimum, wanted) * self.worker_slots, wanted * self.worker_slots

    async def _apply_demand(self, wanted: int) -> None:
        """(Under the lock.) Ask for ``wanted`` workers' slots. Slots held beyond them that no
        staying worker uses are released first, so that lowering ``max`` never takes a slot a
        worker runs on (the master would stop it)."""
        assert self._api is not None and self.allocation_id is not None
        self._wanted = wanted
        mn, mx = self._demand(wanted)
        alloc = await self._api.allocation(self.allocation_id)
        held = {h: int(n) for h, n in (alloc.get("hosts") or {}).items()}
        excess = sum(held.values()) - mx
        if excess > 0:
            give: dict[str, int] = {}
            for host, free in sorted(self.books.unused(held).items()):
                n = min(free - free % self.worker_slots, excess)
                if n > 0:
                    give[host] = n
                    excess -= n
            if give:
                await self._api.release(self.allocation_id, slots=give)
        if self._asked != (mn, mx):
            await self._api.change(self.allocation_id, min=mn, max=mx)
            self._asked = (mn, mx)
        self._dirty = True

    async def _want(self, n: int) -> None:
        """Scale to ``n`` workers: retire the extra ones first when there are more."""
        async with self._scaling:
            async with self._lock:
                ranked: list[str] = []
                if self.scheduler is not None and len(self.books.active()) > n:
                    ranked = [str(x) for x in self.scheduler.workers_to_close(target=n, attribute="name")]
                victims = self.books.choose_for_scale(n, ranked)
                self.books.retire(victims, "scale")
            await self._shrink(victims, n, why="scale")

    async def _retire_names(self, names: list[str], why: str) -> None:
        """Retire the workers Dask's adaptive scaling chose, and ask for that many fewer."""
        async with self._scaling:
            async with self._lock:
                victims = [w for n in names if (w := self.books.named(str(n))) is not None and w.active]
                self.books.retire(victims, why)
                wanted = len(self.books.active())
            await self._shrink(victims, wanted, why=why)

    async def _shrink(self, victims: list[DaskWorker], wanted: int, why: str) -> None:
        if victims:
            self._log(f"{why}: retiring {[w.name for w in victims]}")
            await self._retire(victims, time.monotonic() + self._scale_timeout, why=why)
        async with self._lock:
            for w in victims:
                self.books.released(w.host, w.slots)  # their slots are unused now: _apply_demand gives them back
            await self._apply_demand(wanted)
        self._poke()

    async def _set_floor(self, minimum: int) -> None:
        """``adapt(minimum=m)``: the allocation's ``min`` becomes ``m`` workers' slots."""
        async with self._lock:
            self._minimum = minimum
            await self._apply_demand(self._wanted)

    def scale(self, n: int) -> Any:
        """Ask for ``n`` workers (the allocation's ``max`` becomes ``n * worker_slots``); with
        fewer, the extra workers retire first (their data moves to the others) and their slots
        go back. Returns once the master has the new demand (awaitable when asynchronous)."""
        if n < 0:
            raise ValueError(f"scale: n must be 0 or more, not {n}")
        return self.sync(self._want, int(n))

    def adapt(self, Adaptive: type[ApportionAdaptive] = ApportionAdaptive, minimum: int = 0,  # type: ignore[override]
              maximum: int | float = math.inf, **kwargs: Any) -> ApportionAdaptive:
        """Let Dask's adaptive target drive the allocation: its ``max`` follows the target
        (between ``minimum`` and ``maximum`` workers), its ``min`` is ``minimum`` workers.
        Other keywords as ``distributed.deploy.Adaptive`` (``interval``, ``wait_count``,
        ``target_duration``)."""
        if minimum < 0 or maximum < minimum:
            raise ValueError(f"adapt: need 0 <= minimum <= maximum, not {minimum} and {maximum}")
        return super().adapt(Adaptive=Adaptive, minimum=int(minimum), maximum=maximum, **kwargs)

    # -- what Dask's Cluster and Adaptive read ------------------------------------------------
    @property
    def workers(self) -> dict[str, DaskWorker]:
        """The cluster's live workers by name (retiring ones included)."""
        return {w.name: w for w in self.books.live()}

    @property
    def plan(self) -> set[str]:
        return {w.name for w in self.books.active()}

    @property
    def requested(self) -> set[str]:
        return {w.name for w in self.books.active()}

    def _update_worker_status(self, op: str, msg: Any) -> None:
        if op == "add":
            for address, info in msg.get("workers", {}).items():
                self.books.note_connected(str(info.get("name")), address)
        elif op == "remove":
            self.books.note_disconnected(msg)
        super()._update_worker_status(op, msg)
        self._poke()

    # -- helpers ---------------------------------------------------------------------------
    def _poke(self) -> None:
        """Wake whoever waits for a change (a worker connected or gone, events read)."""
        if self._changed is not None:
            ev, self._changed = self._changed, asyncio.Event()
            ev.set()

    async def _wait_change(self, timeout: float) -> None:
        if self._changed is None or timeout <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("ApportionCluster %s: %s", self.name, task.exception(), exc_info=task.exception())

    def _log(self, msg: str) -> None:
        log.info("ApportionCluster %s: %s", self.name, msg)
        super()._log(msg)

    def __repr__(self) -> str:
        return (f"ApportionCluster({self.name!r}, {self.scheduler_address!r}, consumer={self.consumer!r}, "
                f"allocation={self.allocation_id}, workers={len(self.scheduler_info['workers'])})")
