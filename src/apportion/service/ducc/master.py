"""The live master for a DUCC plan: DUCC's cycle drives the agents.

The same task, queue, store, events, tokens and agents as the EGO master
(``service/master.py``, which this class extends); what differs is the core:

- **work** is jobs, services and reservations (``JobPub``), not allocations. A
  job's processes are activities started on the shares DUCC's cycle gives it; a
  reservation holds a whole machine and runs nothing; a service is one process,
  started again when it exits.
- **the cycle** is ``apportion.engine.ducc.schedule`` over the machines the agents
  report (their memory; ``apportion agent --memory`` overrides it), the jobs, and
  the shares with their processes. It runs every ``tick`` seconds and at once
  when something it depends on changed (a job came or ended, a share left, a
  host changed, a process initialised); a step that only hands out work items
  does not run it.
- **the job driver**: the master holds each job's work items (``work.WorkBook``);
  processes ask for them and report them done or failed (``op_work``). A
  process's first request marks it initialised; times measured on the way
  (initialisation, seconds per item) feed the cycle's caps and prediction.
- **evictions**: an evicted share's process is stopped (SIGTERM, then SIGKILL
  after ``kill_grace``); its space stays occupied until the agent reports the
  process gone (the engine's ``pending_removal``), and the items it held go back
  to the queue.
- **nodes**: a host whose agent missed ``ducc.rm.node.stability`` heartbeats is
  dead: its processes are lost, their items queued again, their shares gone.
  ``vary-off`` (closing a host) evicts its fair-share work and takes nothing new.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from apportion.engine.ducc import api
from apportion.engine.ducc.config import DuccConfig, Policy
from apportion.plan import PlanError
from apportion.service import execution, quotas
from apportion.service.ducc.plan import LiveDucc, compile_ducc_live
from apportion.service.ducc.work import WorkBook
from apportion.service.master import ApiError, Master
from apportion.service.published import ActivityPub, ClientPub, HostPub, JobPub, SharePub
from apportion.service.store.writer import Batch, Snapshot, digest, new_token

log = logging.getLogger("apportion.master")
FOREVER_ITEMS = 10**12  # a service never runs out of work
INIT_FAILURES = 3  # processes of a job that fail before initialising: then the job fails
EGO_ONLY = "this master serves a DUCC plan: submit jobs (POST /v1/jobs), not allocations"


class DuccMaster(Master):
    kind = "ducc"

    # -- recovery ---------------------------------------------------------------------
    def _init_core(self, snapshot: Snapshot) -> None:
        live = compile_ducc_live(self.plan_text, "<plan in force>")
        self.config: DuccConfig = live.config
        self.ducc_accounts = live  # DUCC user -> OS account (ducc.accounts)
        self.consumers = {}
        self.group_names = set()
        self.jobs: dict[int, JobPub] = {j.id: j for j in snapshot.jobs}
        self.books: dict[int, WorkBook] = {
            j.id: WorkBook.restored(j.id, j.retries, snapshot.items.get(j.id, [])) for j in snapshot.jobs
            if j.kind == "job"}
        self.shares: dict[int, SharePub] = {s.id: s for s in snapshot.shares}
        self.share_of: dict[int, int] = {s.activity: s.id for s in self.shares.values() if s.activity is not None}
        self.job_shares: dict[int, dict[int, SharePub]] = {}
        for s in self.shares.values():
            self.job_shares.setdefault(s.job, {})[s.id] = s
        self._next_share = max(snapshot.max_share, max(self.shares, default=0)) + 1
        self._next_job = snapshot.max_job + 1
        self.cycle_no = snapshot.max_cycle
        self.needy: tuple[str, ...] = ()
        self.accounts: dict[str, api.JobAccount] = {}
        self.machine_status: dict[str, str] = {}
        self.init_failures: dict[int, int] = {}
        self.user_clients = {c.name[5:]: c.id for c in self.clients.values() if c.name.startswith("user:")}
        self._dirty = True
        self._last_schedule = 0.0
        # jobs that ended while processes still ran: stopped if still there after kill_grace
        self._finishing: dict[int, float] = {j.id: time.time() + self.settings.kill_grace
                                             for j in self.jobs.values() if j.ended and self.job_shares.get(j.id)}
        self.schedule_seconds: list[float] = []  # the engine's time per cycle (the last 10,000)
        # processes not yet started by their agent get a new process token (only digests are
        # stored); the old one stays good: the agent may have started the process with it
        # just before the restart, before its report that it runs was heard
        batch = Batch()
        for a in self.activities.values():
            if a.job is not None and a.state == "starting" and a.id in self.share_of:
                self._mint(a, self.share_of[a.id], batch, keep=True)
        if batch.tokens:
            self.writer.commit(batch)

    # -- what the EGO API may not do here ------------------------------------------------------
    def check_allocation(self, *args: Any, **kwargs: Any) -> None:
        raise ApiError(409, EGO_ONLY)

    def _refuse(self, *args: Any, **kwargs: Any) -> Callable[[Batch, float], Any]:
        raise ApiError(409, EGO_ONLY)

    op_create_allocation = op_change_allocation = op_release = op_delete = op_start_activity = _refuse

    def quotas_named(self) -> dict[str, quotas.Quota]:
        return self.ducc_accounts.quotas  # ducc.quotas: per user

    def valid_consumer(self, consumer: str) -> bool:
        return consumer == "/" or (consumer.count("/") == 1 and len(consumer) > 1)

    def op_report(self) -> Callable[[Batch, float], Any]:
        def run(batch: Batch, now: float) -> Any:
            raise ApiError(409, "this master serves a DUCC plan: see GET /v1/occupancy and GET /v1/jobs")
        run.read_only = True  # type: ignore[attr-defined]
        return run

    def op_diff_plan(self, text: str) -> Callable[[Batch, float], dict[str, Any]]:
        def run(batch: Batch, now: float) -> dict[str, Any]:
            config = self._compile(text).config
            d = api.schedule(config, self._state(now), now)
            return {"evictions": [{"share": e.share_id, "job": int(e.job) if e.job else None, "host": e.machine,
                                   "reason": e.reason} for e in d.evictions],
                    "new": [{"job": int(n.job), "host": n.machine, "order": n.order} for n in d.new],
                    "blacklisted": list(d.blacklisted)}
        run.read_only = True  # type: ignore[attr-defined]
        return run

    def _compile(self, text: str) -> LiveDucc:
        try:
            return compile_ducc_live(text, "<plan>")
        except PlanError as e:
            raise ApiError(422, [{"line": p.line, "field": p.field, "msg": p.reason, "file": p.file}
                                 for p in e.problems]) from None

    def op_apply_plan(self, text: str, by: str) -> Callable[[Batch, float], int]:
        """A new DUCC configuration under running work (``reconfigure``): work that no longer
        belongs where it runs is blacklisted by the next cycle, as the engine does."""
        def run(batch: Batch, now: float) -> int:
            live = self._compile(text)
            self.config, self.ducc_accounts = live.config, live
            self._dirty = True
            version = self.plan_version + 1
            batch.plan = (version, text, by, now)
            return version
        return run

    # -- the cycle --------------------------------------------------------------------------
    def _next_deadline(self) -> float | None:
        return min(self._finishing.values(), default=None)

    def _state(self, now: float) -> api.DuccState:
        hb = max(self.settings.heartbeat, 1e-3)
        machines = []
        for h in self.hosts.values():
            missed = int(max(0.0, now - h.last_seen) // hb)
            if h.state == "down":
                state = "dead"
            elif h.closed:
                state = "varied_off"
            else:
                state = "ok"
            machines.append(api.Machine(h.name, h.memory, state=state, missed_heartbeats=missed))
        jobs = []
        for j in self.jobs.values():
            if j.ended:
                continue
            if j.kind == "job":
                book = self.books[j.id]
                work, done = book.total, book.done + book.failed
                spi = book.item_seconds / book.done if book.done else None
            elif j.kind == "service":
                work, done, spi = FOREVER_ITEMS, 0, None
            else:
                work, done, spi = 1, 0, None
            jobs.append(api.Job(str(j.id), j.user, j.cls, j.memory, j.max_processes, j.threads, work, done,
                                j.init_seconds, spi, j.submitted_at, j.kind))  # type: ignore[arg-type]
        procs = []
        pending = set()
        for s in self.shares.values():
            book = self.books.get(s.job)
            invest = float(book.done_by.get(s.id, 0)) if book is not None else 0.0
            j = self.jobs.get(s.job)
            is_reservation = j is not None and j.kind == "reservation"
            procs.append(api.Process(s.id, str(s.job), s.host, s.order,
                                     s.initialized_at is not None or is_reservation, s.started_at, invest))
            if s.evicted is not None or j is None or j.ended:
                pending.add(s.id)
        return api.DuccState(tuple(machines), tuple(jobs), tuple(procs), frozenset(pending), self.needy,
                             self._next_share)

    def _cycle(self, batch: Batch, now: float) -> Any:
        self._check_hosts(batch, now)
        if self._finishing:
            self._stop_stragglers(batch, now)
        if not self._dirty and now - self._last_schedule < self.settings.tick:
            return None
        self._dirty = False
        self._last_schedule = now
        state = self._state(now)
        started = time.perf_counter()
        d = api.schedule(self.config, state, now)
        self.last_cycle_seconds = time.perf_counter() - started
        self.schedule_seconds.append(self.last_cycle_seconds)
        if len(self.schedule_seconds) > 10_000:
            del self.schedule_seconds[:5_000]
        self.cycles += 1
        self.cycle_no += 1
        self._apply(d, batch, now)
        batch.cycle = (self.cycle_no, now, self.last_cycle_seconds)
        return d

    def _apply(self, d: api.DuccDecisions, batch: Batch, now: float) -> None:
        self.needy = d.needy
        self.machine_status = dict(d.machines)
        self.accounts = dict(d.jobs)
        leaving = {e.share_id for e in d.evictions}
        for e in d.evictions:
            s = self.shares.get(e.share_id)
            if s is None:
                continue
            if e.reason == "node-dead":
                self._leave(s, batch, now, lost=True)
                continue
            s.evicted = e.reason
            batch.shares[s.id] = s
            j = self.jobs.get(s.job)
            if j is not None:
                self._event(batch, j.client, {"type": "evicted", "job": j.id, "share": s.id, "host": s.host,
                                              "reason": e.reason, "activity": s.activity,
                                              **self._investments(s, leaving)})
            self._leave(s, batch, now, stop=f"evicted: {e.reason}")
        for lost in d.lost:
            s = self.shares.get(lost.share_id)
            if s is not None:
                self._leave(s, batch, now, lost=True)
        for n in d.new:
            j = self.jobs.get(int(n.job))
            if j is None or j.ended:
                continue
            s = SharePub(n.share_id, j.id, n.machine, n.order, None, now, self.cycle_no)
            self.shares[s.id] = s
            self.job_shares.setdefault(j.id, {})[s.id] = s
            if j.kind != "reservation":
                self._start_process(j, s, batch, now)
            batch.shares[s.id] = s
            self._event(batch, j.client, {"type": "placed", "job": j.id, "share": s.id, "host": s.host,
                                          "order": s.order, "activity": s.activity})
        self._next_share = max(self._next_share, d.next_share_id)
        for jid, acc in d.jobs.items():
            j = self.jobs.get(int(jid))
            if j is None or j.ended:
                continue
            state = "running" if self.job_shares.get(j.id) else "waiting"
            reason = acc.reason if state == "waiting" else ""
            if (state, reason) != (j.state, j.reason):
                j.state, j.reason = state, reason
                batch.jobs[j.id] = j
                self._event(batch, j.client, {"type": "job", "job": j.id, "state": state, "reason": reason})

    def _investments(self, s: SharePub, leaving: set[int]) -> dict[str, Any]:
        """What an evicted share had invested, beside the job's shares that stay (DUCC's RM documentation:
        the least investment goes first: a process still initialising, then the least work done)."""
        book = self.books.get(s.job)
        done = book.done_by if book is not None else {}
        kept = [x for x in self.job_shares.get(s.job, {}).values() if x.id not in leaving and x.evicted is None]
        ready = [done.get(x.id, 0) for x in kept if x.initialized_at is not None]
        return {"initialized": s.initialized_at is not None, "investment": done.get(s.id, 0),
                "kept_least": min(ready) if ready else None,
                "kept_initializing": sum(1 for x in kept if x.initialized_at is None)}

    def _start_process(self, j: JobPub, s: SharePub, batch: Batch, now: float) -> ActivityPub:
        a = ActivityPub(self._next_activity, 0, j.client, s.host, list(j.argv), dict(j.env), j.cwd, s.order,
                        "starting", now, job=j.id)
        self._next_activity += 1
        s.activity = a.id
        self.share_of[a.id] = s.id
        self.activities[a.id] = a
        self.live_on.setdefault(s.host, {})[a.id] = a
        self._mint(a, s.id, batch)
        batch.activities[a.id] = a
        batch.shares[s.id] = s
        batch.wake_hosts.add(s.host)
        return a

    def _mint(self, a: ActivityPub, share: int, batch: Batch, keep: bool = False) -> None:
        """A process token for ``a``: its job's work for this share, nothing else (``keep``:
        beside the share's token minted before, which goes with the share)."""
        a.secret = new_token()
        if not keep:
            batch.dropped_tokens.append(share)
        batch.tokens.append({"digest": digest(a.secret), "kind": "process", "consumer": None, "host": None,
                             "created_at": time.time(), "job": a.job, "share": share})

    def _share_gone(self, s: SharePub, batch: Batch, now: float, crashed: str | None = None) -> None:
        """The share's space is free from the next cycle on; what its process held is queued
        again (``crashed``: its process failed by itself, and the try counts)."""
        if s.gone_cycle is not None:
            return
        s.gone_cycle, s.gone_at = self.cycle_no + 1, now
        self.shares.pop(s.id, None)
        self.job_shares.get(s.job, {}).pop(s.id, None)
        if s.activity is not None:
            self.share_of.pop(s.activity, None)
        batch.shares[s.id] = s
        batch.dropped_tokens.append(s.id)
        book = self.books.get(s.job)
        held = sorted(book.holds(s.id)) if book is not None and crashed is not None else []
        if book is not None and book.give_back(s.id, crashed):
            self._items_into(book, batch)
            j = self.jobs.get(s.job)
            if j is not None:
                if held:  # the job's user learns which items failed a try, and why
                    self._event(batch, j.client, {"type": "items_failed", "job": j.id, "share": s.id,
                                                  "host": s.host, "items": held, "error": crashed})
                self._end_if_finished(j, book, batch, now)
        self._dirty = True

    def _items_into(self, book: WorkBook, batch: Batch) -> None:
        for i, row in book.take_changes().items():
            batch.items[(book.job, i)] = row

    # -- hooks of the common master ---------------------------------------------------------------
    def _missed_limit(self) -> int:
        return self.config.properties.node_stability  # ducc.rm.node.stability

    def _engine_host_state(self, name: str, state: str) -> None:
        self._dirty = True

    def _activity_fields(self, a: ActivityPub) -> dict[str, Any]:
        out = super()._activity_fields(a)
        if a.job is not None:
            out["job"] = a.job
        return out

    def _start_extra(self, a: ActivityPub) -> dict[str, Any]:
        return execution.ducc_start(self, a)

    def _ended(self, a: ActivityPub, batch: Batch) -> None:
        sid = self.share_of.get(a.id)
        s = self.shares.get(sid) if sid is not None else None
        if s is None:
            return
        j = self.jobs.get(s.job)
        now = self._now
        if j is not None and not j.ended and s.evicted is None and not a.stop and a.state != "lost":
            if a.state == "failed" and j.kind == "service":
                # started again it would be refused again: the service fails, saying why
                self._end_job(j, "failed", f"its process could not start on {s.host}: {a.stop_reason}", batch, now)
                return
            if j.kind == "service":
                # a service is kept running: the same share gets a new process
                self.share_of.pop(a.id, None)
                self._event(batch, j.client, {"type": "restarted", "job": j.id, "share": s.id, "host": s.host,
                                              "exit_code": a.exit_code})
                self._start_process(j, s, batch, now)
                return
            if j.kind == "job" and s.initialized_at is None and a.exit_code != 0:
                n = self.init_failures[j.id] = self.init_failures.get(j.id, 0) + 1
                if n >= INIT_FAILURES:
                    last = f"last: {a.stop_reason}" if a.state == "failed" or a.oom else \
                        f"last exit code {a.exit_code}"
                    self._end_job(j, "failed", f"{n} processes ended before they initialised ({last})", batch, now)
            if a.oom:  # beyond its share's memory: a failed try of what it held, as DUCC's agent says it
                self._share_gone(s, batch, now, crashed=f"ShareSizeExceeded: its process on {s.host} was killed "
                                                        f"out of memory ({a.stop_reason})")
                return
            if a.exit_code not in (0, None) or a.signal is not None:
                how = f"exit code {a.exit_code}" if a.signal is None else f"signal {a.signal}"
                self._share_gone(s, batch, now, crashed=f"its process on {s.host} ended with {how}")
                return
        self._share_gone(s, batch, now)

    def _start_env(self, a: ActivityPub) -> dict[str, str]:
        env = super()._start_env(a)
        if a.job is not None:
            j = self.jobs.get(a.job)
            env.update(APPORTION_JOB=str(a.job), APPORTION_PROCESS=str(self.share_of.get(a.id, "")),
                       APPORTION_TOKEN=a.secret or "", APPORTION_THREADS=str(j.threads if j else 1))
        return env

    def commands_for(self, name: str, listed: dict[int, str]) -> list[dict[str, Any]]:
        out = super().commands_for(name, listed)
        return [c for c in out if not (c["op"] == "start" and c["env"].get("APPORTION_TOKEN") == "")]

    def op_agent_register(self, name: str, slots: int, memory: float, os_name: str, attributes: dict[str, Any],
                          running: list[int], agent: dict[str, Any] | None = None
                          ) -> Callable[[Batch, float], HostPub]:
        """A machine joins (or comes back) with the memory its agent reports; the next cycle sees it."""
        def run(batch: Batch, now: float) -> HostPub:
            h, _ = self._reported_host(name, slots, memory, os_name, attributes, batch, now, agent)
            if h.state == "down":
                h.state = "closed" if h.closed else "ok"
            self._reconcile(name, running, batch, now)
            self._dirty = True
            return h
        return run

    def _take_back(self, name: str, batch: Batch) -> None:
        """Closing a host is DUCC's vary-off: the next cycle evicts its fair-share work
        (``_state`` shows it varied off); there is nothing more to take back."""

    # -- jobs, services, reservations -------------------------------------------------------------
    def user_client(self, user: str, batch: Batch, now: float) -> int:
        """The client whose event stream tells ``user`` of their work (made on first use)."""
        cid = self.user_clients.get(user)
        if cid is None:
            c = ClientPub(self._next_client, f"user:{user}", f"/{user}", now)
            self._next_client += 1
            self.clients[c.id] = c
            self.client_names[(c.consumer, c.name)] = c.id
            self.quota.clients.add(c.consumer)
            self.user_clients[user] = c.id
            batch.clients.append(c)
            cid = c.id
        return cid

    def check_work(self, kind: str, cls: str | None, memory: float) -> str:
        """The class the work goes to (its default when None); 422 naming the field when the
        configuration refuses it. Nothing is changed."""
        cfg = self.config
        if cls is None:
            policy = {"job": Policy.FAIR_SHARE, "service": Policy.FIXED_SHARE,
                      "reservation": Policy.RESERVE}[kind]
            default = cfg.default_class(policy)
            if default is None:
                raise ApiError(422, f"class: no default {policy.value} class is configured: name one")
            cls = default.name
        c = cfg.classes.get(cls)
        if c is None:
            known = ", ".join(x.name for x in cfg.schedulable_classes())
            raise ApiError(422, f"class: {cls} is not a class of the DUCC configuration (classes: {known})")
        if c.abstract:
            raise ApiError(422, f"class: {cls} is abstract: no work may be submitted to it")
        if kind == "job" and c.policy is Policy.RESERVE:
            raise ApiError(422, f"class: {cls} is a RESERVE class: reserve a machine with POST /v1/reservations")
        if kind != "job" and c.policy is Policy.FAIR_SHARE:
            raise ApiError(422, f"class: a {kind} needs a FIXED_SHARE or RESERVE class, and {cls} is FAIR_SHARE")
        if not math.isfinite(memory) or memory <= 0:
            raise ApiError(422, "memory: must be a positive number of GB")
        pool = c.nodepool
        quantum = cfg.quantum(pool)
        order = api.process_order(memory, quantum)
        hosts = set(cfg.pool_hosts(pool)) if c.policy is not Policy.FAIR_SHARE else None
        biggest = 0
        for h in self.hosts.values():
            if hosts is not None and h.name not in hosts and cfg.nodepool_of(h.name) is not None:
                continue
            biggest = max(biggest, api.machine_order(h.memory, quantum))
        if self.hosts and order > biggest:
            raise ApiError(422, f"memory: {memory:g} GB is {order} quanta of {quantum} GB; the largest machine "
                                f"has {biggest} ({biggest * quantum} GB)")
        return cls

    def op_submit(self, kind: str, user: str, cls: str | None, memory: float, max_processes: int | None,
                  threads: int, work: list[Any], argv: list[str], env: dict[str, str], cwd: str | None,
                  retries: int) -> Callable[[Batch, float], JobPub]:
        def run(batch: Batch, now: float) -> JobPub:
            name = self.check_work(kind, cls, memory)
            quotas.check_job(self, f"/{user}")
            client = self.user_client(user, batch, now)
            j = JobPub(self._next_job, kind, user, name, memory, max_processes, threads, argv, env, cwd, client,
                       "waiting", "submitted", retries, now)
            self._next_job += 1
            self.jobs[j.id] = j
            self.quota.jobs.add(f"/{user}")
            batch.jobs[j.id] = j
            if kind == "job":
                book = self.books[j.id] = WorkBook.new(j.id, work, retries)
                batch.new_items.extend({"job": j.id, "idx": i, "item": json.dumps(item), "state": "queued",
                                        "attempts": 0, "share": None, "error": None}
                                       for i, item in enumerate(book.items))
            self._event(batch, client, {"type": "job", "job": j.id, "state": "waiting", "reason": "submitted",
                                        "kind": kind})
            self._dirty = True
            return j
        return run

    def _end_job(self, j: JobPub, state: str, reason: str, batch: Batch, now: float) -> None:
        """A job ends. Cancelled: its processes are stopped now. Done or failed: each learns it
        from its next request for work and exits by itself; one still running ``kill_grace``
        seconds later is stopped (SIGTERM, then SIGKILL)."""
        if not j.ended:
            self.quota.jobs.add(f"/{j.user}", -1)
        j.state, j.reason, j.ended_at = state, reason, now
        batch.jobs[j.id] = j
        self._event(batch, j.client, {"type": "job", "job": j.id, "state": state, "reason": reason})
        if state == "cancelled":
            self._stop_job(j, batch, now)
        else:
            self._finishing[j.id] = now + self.settings.kill_grace
            for s in list(self.job_shares.get(j.id, {}).values()):
                self._leave(s, batch, now)  # only a share with no process running goes now
        self._dirty = True

    def _end_if_finished(self, j: JobPub, book: WorkBook, batch: Batch, now: float) -> None:
        """A job ends when every item is done or has failed for good."""
        if book.finished and not j.ended:
            self._end_job(j, "failed" if book.failed else "done",
                          f"{book.failed} item(s) failed" if book.failed else "every item done", batch, now)

    def _stop_job(self, j: JobPub, batch: Batch, now: float) -> None:
        self._finishing.pop(j.id, None)
        for s in list(self.job_shares.get(j.id, {}).values()):
            self._leave(s, batch, now, stop=f"job {j.state}")

    def _process(self, s: SharePub) -> ActivityPub | None:
        """The share's process while it is starting or running."""
        a = self.activities.get(s.activity) if s.activity is not None else None
        return a if a is not None and a.live else None

    def _leave(self, s: SharePub, batch: Batch, now: float, stop: str | None = None, lost: bool = False) -> None:
        """A share with no process running is gone now. One whose process runs is gone once
        the process is: ``lost`` (its host is dead) at once; ``stop`` (why): when the agent
        reports it stopped; neither: when it exits by itself."""
        a = self._process(s)
        if a is None:
            self._share_gone(s, batch, now)
        elif lost:
            self._end(a, "lost", None, None, batch, now)
        elif stop is not None and not a.stop:
            self._stop(a, stop, batch)

    def _stop_stragglers(self, batch: Batch, now: float) -> None:
        """Processes of ended jobs that did not exit by themselves in time are stopped."""
        for jid, deadline in list(self._finishing.items()):
            if deadline <= now:
                j = self.jobs.get(jid)
                if j is not None:
                    self._stop_job(j, batch, now)
                else:
                    del self._finishing[jid]

    def op_cancel(self, jid: int, kind: str | None = None) -> Callable[[Batch, float], JobPub]:
        def run(batch: Batch, now: float) -> JobPub:
            j = self.job(jid, kind)
            if not j.ended:
                self._end_job(j, "cancelled", "cancelled by request", batch, now)
            return j
        return run

    def job(self, jid: int, kind: str | None = None) -> JobPub:
        j = self.jobs.get(jid)
        if j is None or (kind is not None and j.kind != kind):
            raise ApiError(404, f"no {kind or 'job'} {jid}")
        return j

    def op_view(self, jid: int, kind: str | None = None) -> Callable[[Batch, float], dict[str, Any]]:
        """A job's view after the step (a new reservation knows its machine once the cycle ran)."""
        def run(batch: Batch, now: float) -> dict[str, Any]:
            return self.job_json(self.job(jid, kind))
        run.read_only = True  # type: ignore[attr-defined]
        return run

    # -- the job driver -----------------------------------------------------------------------------
    def op_work(self, jid: int, share: int, done: list[int], failed: list[tuple[int, str]], want: int | None
                ) -> Callable[[Batch, float], dict[str, Any]]:
        def run(batch: Batch, now: float) -> dict[str, Any]:
            j = self.job(jid, "job")
            book = self.books[jid]
            s = self.shares.get(share)
            if s is None or s.job != jid:
                raise ApiError(404, f"process: no live process {share} of job {jid}")
            holds = book.holds(share)
            for field, items in (("done", done), ("failed", [i for i, _ in failed])):
                for i in items:
                    if i not in holds:
                        raise ApiError(422, f"{field}: item {i} is not held by process {share} of job {jid}")
            if len(set(done) | {i for i, _ in failed}) != len(done) + len(failed):
                raise ApiError(422, "done: an item is reported twice")
            if s.initialized_at is None:
                s.initialized_at = now
                batch.shares[s.id] = s
                inits = [x.initialized_at - x.started_at for x in self.job_shares.get(jid, {}).values()
                         if x.initialized_at is not None]
                j.init_seconds = sum(inits) / len(inits)
                batch.jobs[j.id] = j
                self._dirty = True
            for i in done:
                book.finish(share, i, now)
            for i, error in failed:
                book.fail(share, i, error[:2000])
            if done:
                spi = book.item_seconds / book.done if book.done else None
                if spi != j.seconds_per_item:
                    j.seconds_per_item = spi
                    batch.jobs[j.id] = j
            a = self._process(s)
            leaving = j.ended or s.evicted is not None or (a is not None and a.stop)
            given: list[int] = []
            if not leaving:
                room = j.threads - len(book.holds(share))
                n = room if want is None else max(0, min(want, room))
                given = book.give(share, n, now)
            self._end_if_finished(j, book, batch, now)
            self._items_into(book, batch)
            more = not leaving and not j.ended and (bool(book.queue) or book.in_flight > 0)
            return {"items": [{"id": i, "data": book.items[i]} for i in given], "more": more,
                    "holding": sorted(book.holds(share))}
        return run

    # -- what the API shows -------------------------------------------------------------------------
    def job_json(self, j: JobPub) -> dict[str, Any]:
        procs: dict[str, int] = {}
        for s in self.job_shares.get(j.id, {}).values():
            procs[s.host] = procs.get(s.host, 0) + 1
        out: dict[str, Any] = {
            "id": j.id, "kind": j.kind, "state": j.state, "reason": j.reason, "user": j.user, "class": j.cls,
            "client": j.client,  # whose event stream tells of it: GET /v1/clients/{client}/events
            "memory": j.memory, "max_processes": j.max_processes, "threads": j.threads,
            "processes": dict(sorted(procs.items())), "submitted_at": j.submitted_at, "ended_at": j.ended_at,
            "init_seconds": j.init_seconds, "seconds_per_item": j.seconds_per_item,
        }
        book = self.books.get(j.id)
        if book is not None:
            out["items"] = book.counts()
            if book.failed:
                out["failed_items"] = book.failures()[:1000]
        if j.kind != "job":
            hosts = sorted(procs)
            out["host"] = hosts[0] if hosts else None
        acc = self.accounts.get(str(j.id))
        if acc is not None and not j.ended:
            out["deserved"] = acc.deserved
            out["cap"] = acc.cap
        return out

    def occupancy(self) -> list[dict[str, Any]]:
        """Per machine, as rm_qoccupancy: its order, free quanta and the shares on it."""
        out = []
        by_host: dict[str, list[SharePub]] = {}
        for s in self.shares.values():
            by_host.setdefault(s.host, []).append(s)
        for h in sorted(self.hosts.values(), key=lambda h: h.name):
            pool = self.config.nodepool_of(h.name) or next(iter(self.config.nodepools), None)
            quantum = self.config.quantum(pool) if pool is not None else 1
            order = api.machine_order(h.memory, quantum)
            shares = sorted(by_host.get(h.name, []), key=lambda s: s.id)
            used = sum(s.order for s in shares)
            out.append({"name": h.name, "order": order, "free": max(0, order - used), "memory": h.memory,
                        "quantum": quantum, "nodepool": pool,
                        "state": self.machine_status.get(h.name, "varied_off" if h.closed else
                                                         ("dead" if h.state == "down" else "ok")),
                        "shares": [{"job": s.job, "order": s.order, "share": s.id,
                                    "evicting": s.evicted is not None} for s in shares]})
        return out
