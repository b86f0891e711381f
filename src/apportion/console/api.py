"""Read-only ``/v1`` views for the console, each behind the same tokens and scopes as the
rest of the API (an admin sees everything; a consumer token its own subtree, and the
hosts, which every user token may read):

- ``GET /v1/summary``: the Overview's numbers, counted by the master in one pass;
- ``GET /v1/hostmap``: hosts as compact tiles, a page at a time (10,000 hosts are
  some 40 bytes each, not the whole host JSON), each with the consumer that holds most of
  it (``other`` for a consumer outside the token's scope), in slots (a DUCC master's in
  quanta, its shares' quanta counted as used); ``GET /v1/hostmap/{name}`` one host's page;
- ``GET /v1/kindmap``: the cluster, the consumers and a page of hosts per resource kind
  (slots, cores, memory, GPUs), with each consumer's dominant share (``console/kinds.py``);
- ``GET /v1/queue``: the work that waits, its age, position and ``pending_reason``;
- ``GET /v1/jobview/{id}``: a DUCC job with its processes and their output's last lines;
- ``GET /v1/events``: every event the token may see, as Server-Sent Events, with a
  ``change`` message naming the kinds of thing each committed step changed;
- ``GET /v1/history``: the samples of the last hour or day (service/history.py);
- ``GET /v1/classes``: a DUCC plan's classes with what their jobs hold and deserve;
- ``GET /v1/plan/versions`` (admin): every version of the plan, who applied it and when;
  ``GET /v1/plan/versions/{v}`` one version's text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as FPath
from fastapi.responses import StreamingResponse

from apportion.console import views
from apportion.console.feed import Feed
from apportion.service import history
from apportion.service.api.deps import answer, run
from apportion.service.auth import Caller, Principal, admin, user
from apportion.service.master import ApiError, Master

router = APIRouter(prefix="/v1", tags=["console"])
KEEPALIVE = 15.0
COALESCE = 0.1  # seconds: changes closer together than this go out as one message


def _visible(p: Principal):  # noqa: ANN202 - a predicate on a consumer path (None: a deleted client's)
    return lambda consumer: p.kind == "admin" or (consumer is not None and p.may_see(consumer))


host_counts = views.host_counts


_demand_cache: dict[tuple[int, int, str | None], tuple[int, int]] = {}  # (master, change, scope) -> totals


async def _demand(request: Request, m: Master, p: Principal) -> tuple[int, int]:
    """Demand and shortfall of the leaves ``p`` may see, from the engine's report; taken again
    only after a committed step changed something (the report walks every consumer)."""
    feed = getattr(request.app.state, "console_feed", None)
    key = (id(m), feed.seq if feed is not None else -1, p.consumer if p.kind != "admin" else None)
    if feed is not None and key in _demand_cache:
        return _demand_cache[key]
    report = await run(m, m.op_report())
    leaves = m.engine.state.consumers
    demand = shortfall = 0
    for path, line in report.consumers.items():
        c_ = leaves.get(path)
        if c_ is None or not c_.is_leaf or not p.may_see(path):
            continue
        for gl in line.groups.values():
            demand += gl.demand
            shortfall += gl.shortfall
    if feed is not None and key[1] == feed.seq:  # nothing changed while the report was made
        if len(_demand_cache) > 256 or any(k[1] != feed.seq for k in _demand_cache):
            _demand_cache.clear()
        _demand_cache[key] = (demand, shortfall)
    return demand, shortfall


@router.get("/summary")
async def summary(request: Request, c: Caller = Depends(user)) -> Any:
    """The Overview: hosts by state; slots (DUCC: quanta) used and free; the allocations,
    demand, shortfall and reclaims in flight the token may see (DUCC: its jobs by state, their
    processes and the quanta they hold); ``token``: who calls (kind and consumer)."""
    p, m = c.p, c.m
    out: dict[str, Any] = {"kind": m.kind, "plan_version": m.plan_version, "at": time.time(), **host_counts(m),
                           "token": {"kind": p.kind, "consumer": p.consumer, "name": p.name}}
    allocs = [a for a in m.allocations.values() if p.may_see(a.consumer)]
    reclaims = [r for a in allocs for r in a.reclaiming.values()]
    out["allocations"] = len(allocs)
    out["held"] = out["allocated"] = sum(a.held for a in allocs)
    out["asked"] = sum(a.max for a in allocs)
    out["reclaims"] = len(reclaims)
    out["reclaiming"] = sum(r.slots for r in reclaims)
    out["next_deadline"] = min((r.deadline for r in reclaims if r.deadline is not None), default=None)
    if m.kind == "ducc":
        jobs: dict[str, int] = {}
        for j in getattr(m, "jobs", {}).values():
            if p.may_see(f"/{j.user}"):
                key = f"{j.kind}s_{j.state}"
                jobs[key] = jobs.get(key, 0) + 1
        out["jobs"] = jobs
        shares = [sh for sh in m.shares.values()  # type: ignore[attr-defined]
                  if (j := m.jobs.get(sh.job)) is not None and p.may_see(f"/{j.user}")]  # type: ignore[attr-defined]
        out["processes"] = len(shares)  # DUCC's shares: its work's processes (and reservations' machines)
        out["held"] = out["allocated"] = sum(sh.order for sh in shares)  # quanta allocated to those shares
        return answer(out)
    out["demand"], out["shortfall"] = await _demand(request, m, p)
    return answer(out)


@router.get("/hostmap")
async def hostmap(offset: int = Query(0, ge=0, le=2**31 - 1), limit: int = Query(2000, ge=1, le=10_000),
                  state: Literal["ok", "closed", "unreachable", "down", "lost"] | None = None,
                  name: str | None = Query(None, max_length=200, description="only hosts whose name has this"),
                  c: Caller = Depends(user)) -> Any:
    """Hosts as ``tiles``, sorted by name, a page at a time: each ``[name, size, memory (GB),
    state, closed, used, owner, activities]`` where ``size`` and ``used`` count ``unit``
    (slots; quanta on a DUCC master, whose shares are quanta of memory) and ``owner``
    indexes ``owners`` (the consumer holding most of the host; ``other`` outside the
    token's scope; -1 nobody)."""
    p, m = c.p, c.m
    hosts = sorted(m.hosts.values(), key=lambda h: h.name)
    if state is not None:
        hosts = [h for h in hosts if h.state == state]
    if name:
        low = name.lower()
        hosts = [h for h in hosts if low in h.name.lower()]
    page = hosts[offset:offset + limit]
    wanted = {h.name for h in page}
    by_host: dict[str, dict[str, int]] = {}
    size: dict[str, tuple[int, int]] = {}
    if m.kind == "ducc":
        for host, (order, used, per) in views.ducc_use(m).items():
            if host in wanted:
                size[host] = (order, used)
                d = by_host.setdefault(host, {})
                for who, n in per.items():
                    who = who if p.may_see(who) else "other"
                    d[who] = d.get(who, 0) + n
    else:
        for h in m.holdings.values():
            if h.host in wanted:
                a = m.allocations.get(h.request)
                if a is not None:
                    who = a.consumer if p.may_see(a.consumer) else "other"
                    d = by_host.setdefault(h.host, {})
                    d[who] = d.get(who, 0) + h.slots
    owners: dict[str, int] = {}
    tiles = []
    for h in page:
        held = by_host.get(h.name)
        owner = -1
        if held:
            top = max(held.items(), key=lambda kv: (kv[1], kv[0]))[0]
            owner = owners.setdefault(top, len(owners))
        cap, used = size.get(h.name, (h.slots, m.host_used.get(h.name, 0)))
        tiles.append([h.name, cap, h.memory, h.state, h.closed, used, owner, len(m.live_on.get(h.name, {}))])
    return answer({**host_counts(m), "total": len(hosts), "offset": offset, "tiles": tiles, "owners": list(owners)})


@router.get("/kindmap")
async def kindmap(offset: int = Query(0, ge=0, le=2**31 - 1), limit: int = Query(200, ge=1, le=10_000),
                  name: str | None = Query(None, max_length=200, description="only hosts whose name has this"),
                  c: Caller = Depends(user)) -> Any:
    """The Resources page (EGO): per kind (slots, cores, memory GB, GPUs, custom), the cluster's
    ``totals`` and ``used``; every consumer the token may see with what its subtree holds
    (``used``) and its ``dominant_share`` (and ``dominant_kind``); ``others``, what consumers
    outside its scope hold; and a page of ``hosts`` (sorted by name), each with its ``total``,
    ``used`` and ``gpus`` (device -> the part live activities hold), as ``/v1/hosts`` and
    ``/v1/consumers`` count them."""
    if c.m.kind == "ducc":
        raise ApiError(409, "this master serves a DUCC plan: its shares are quanta of memory, not kinds")
    from apportion.console.kinds import kind_view

    return answer(kind_view(c.m, c.p, offset, limit, name))


@router.get("/hostmap/{name}")
async def host_page(name: str = FPath(..., max_length=200), c: Caller = Depends(user)) -> Any:
    """One host for its page: state, heartbeat age, size, used, free and fenced, what its
    agent reported, and the allocations (DUCC: shares) on it the token may see (``others``:
    slots held there by consumers outside its scope)."""
    got = views.host_view(c.m, c.p, name, time.time())
    if got is None:
        raise ApiError(404, f"no host {name}")
    return answer(got)


@router.get("/queue")
async def queue(limit: int = Query(500, ge=1, le=10_000, description="at most this many rows"),
                allocation: int | None = Query(None, ge=1, le=2**31 - 1, description="only this allocation"),
                c: Caller = Depends(user)) -> Any:
    """Work that waits, oldest first: allocations holding less than their max (DUCC: jobs,
    reservations and services waiting for a process, or holding fewer than they deserve),
    each with its age, its position among its consumer's waiting requests (the order the
    engine serves them in; DUCC: among its class's waiting work, by submission), why it
    waits (``pending_reason``, counted from what the master published), whether it is a rigid
    allocation waiting with slots kept for it (``reserved``) and its ``planned_start`` (Unix
    seconds, from the running work's walltimes; null: not known, or not reserved; DUCC plans
    no start times); ``total``: how many wait, of which the first
    ``limit`` are listed (``allocation``: that one only, if it waits; EGO)."""
    p, m = c.p, c.m
    now = time.time()
    if m.kind == "ducc":
        total, rows = views.ducc_queue(m, p, now, limit)
    else:
        report = await run(m, m.op_report())
        total, rows = views.ego_queue(m, p, report, now, limit, allocation)
    return answer({"kind": m.kind, "at": now, "total": total, "waiting": rows})


@router.get("/jobview/{jid}")
async def job_page(jid: int = FPath(..., ge=1, le=2**31 - 1),
                   lines: int = Query(views.TAIL, ge=1, le=1000, description="lines of each process's output"),
                   c: Caller = Depends(user)) -> Any:
    """A DUCC job (service, reservation) for its page: what ``GET /v1/jobs/{id}`` says, its
    processes (each with its host, state, items done and held, and its output's last
    ``lines`` lines) and its reserved machines."""
    m = c.m
    if m.kind != "ducc":
        raise ApiError(409, "this master serves an EGO plan: jobs belong to a DUCC plan")
    j = m.jobs.get(jid)  # type: ignore[attr-defined]
    if j is None:
        raise ApiError(404, f"no job {jid}")
    if not c.p.may_see(f"/{j.user}"):
        raise ApiError(403, f"{c.p.name} may not see job {jid} of user {j.user}")
    return answer(views.job_view(m, jid, lines))


@router.get("/history")
async def get_history(request: Request, span: Literal["hour", "day"] = "hour",
                      c: Caller = Depends(user)) -> Any:
    """Samples of the last hour or day, oldest first, and one of now. A consumer token gets
    the hosts and slots (which it may read anyway), not the cluster's demand."""
    now = time.time()
    got = await asyncio.to_thread(history.read, request.app.state.writer.engine, span, now)
    rows = [s.json() for s in got] + [history.take(c.m, now).json()]
    if c.p.kind != "admin":
        for r in rows:
            for k in ("allocations", "demand", "reclaiming"):
                r.pop(k, None)
    return answer({"span": span, "samples": rows})


@router.get("/classes")
async def classes(c: Caller = Depends(user)) -> Any:
    """A DUCC plan's classes: priority, weight, policy, nodepool, and the processes (shares)
    the token's visible jobs in each hold and deserve now."""
    m = c.m
    if m.kind != "ducc":
        raise ApiError(409, "this master serves an EGO plan: classes belong to a DUCC plan")
    held: dict[str, int] = {}
    deserved: dict[str, int] = {}
    jobs: dict[str, int] = {}
    for j in m.jobs.values():  # type: ignore[attr-defined]
        if j.ended or not c.p.may_see(f"/{j.user}"):
            continue
        jobs[j.cls] = jobs.get(j.cls, 0) + 1
        acc = m.accounts.get(str(j.id))  # type: ignore[attr-defined]
        if acc is not None:
            held[j.cls] = held.get(j.cls, 0) + acc.held
            deserved[j.cls] = deserved.get(j.cls, 0) + acc.deserved
    out = []
    for k in sorted(m.config.classes.values(), key=lambda k: (k.priority, k.name)):  # type: ignore[attr-defined]
        if k.abstract:
            continue
        out.append({"name": k.name, "policy": str(getattr(k.policy, "value", k.policy)), "priority": k.priority,
                    "weight": k.weight, "nodepool": k.nodepool, "jobs": jobs.get(k.name, 0),
                    "held": held.get(k.name, 0), "deserved": deserved.get(k.name, 0)})
    return answer({"classes": out})


def _feed(request: Request) -> Feed:
    feed = getattr(request.app.state, "console_feed", None)
    if feed is None:
        raise ApiError(503, "the live feed starts with the master")
    return feed


@router.get("/events", responses={200: {"content": {"text/event-stream": {}}}})
async def all_events(request: Request, after: int = Query(0, ge=0, le=2**63 - 1, description="events after this id"),
                     c: Caller = Depends(user)) -> StreamingResponse:
    """Server-Sent Events: ``event: hello`` (the newest event id and change number), then
    every event of the token's subtree as it is committed (``id:`` its event id) and, after
    each committed step, ``event: change`` naming what it changed (``{"seq", "kinds"}``)."""
    feed = _feed(request)
    visible = _visible(c.p)

    async def stream() -> AsyncIterator[bytes]:
        seq, last = feed.seq, after
        newest = c.m.next_event - 1
        yield f"event: hello\ndata: {json.dumps({'seq': seq, 'event': newest})}\n\n".encode()
        if last == 0:
            last = newest
        while True:
            w = feed.waiter()
            if feed.seq == seq:
                try:
                    await asyncio.wait_for(w.wait(), KEEPALIVE)
                except TimeoutError:
                    yield b": keepalive\n\n"
                    continue
            await asyncio.sleep(COALESCE)  # let a burst of steps go out as one message
            parts = []
            for e in feed.events_after(last, visible):
                parts.append(f"id: {e['id']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n")
                last = e["id"]
            kinds = feed.since(seq)
            seq = feed.seq
            if kinds:
                parts.append(f"event: change\ndata: {json.dumps({'seq': seq, 'kinds': sorted(kinds)})}\n\n")
            if parts:
                yield "".join(parts).encode()

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _versions(db: Any, version: int | None) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from apportion.service.store.models import PlanRow

    cols = [PlanRow.version, PlanRow.applied_by, PlanRow.applied_at] + ([PlanRow.text] if version else [])
    q = select(*cols).order_by(PlanRow.version.desc())
    if version:
        q = q.where(PlanRow.version == version)
    with db.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q.limit(1000))]


@router.get("/plan/versions")
async def plan_versions(request: Request, c: Caller = Depends(admin)) -> Any:
    """Every version of the plan, newest first: who applied it and when (not the texts)."""
    return answer({"versions": await asyncio.to_thread(_versions, request.app.state.writer.engine, None)})


@router.get("/plan/versions/{version}")
async def plan_version(request: Request, version: int = FPath(..., ge=1, le=2**31 - 1),
                       c: Caller = Depends(admin)) -> Any:
    got = await asyncio.to_thread(_versions, request.app.state.writer.engine, version)
    if not got:
        raise ApiError(404, f"no plan version {version}")
    return answer(got[0])
