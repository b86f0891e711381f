"""DUCC work on a master that serves a DUCC plan: jobs and their work items,
reservations, services, occupancy and reconfiguration (docs/service.md, "DUCC").

On a master serving an EGO plan every path here answers 409.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Response

from apportion.service.api.deps import answer, run
from apportion.service.api.schemas import JobIn, ReservationIn, ServiceIn, WorkIn
from apportion.service.auth import Caller, Principal, admin, require_consumer, user, worker
from apportion.service.ducc.master import DuccMaster
from apportion.service.master import ApiError, Master
from apportion.service.published import JobPub

router = APIRouter(prefix="/v1", tags=["ducc"])


def _ducc(m: Master) -> DuccMaster:
    if not isinstance(m, DuccMaster):
        raise ApiError(409, "this master serves an EGO plan: jobs, reservations and services need a DUCC plan "
                            "(a plan with a ducc: section, or apportion server --ducc DIR)")
    return m


def _user_of(p: Principal, asked: str | None) -> str:
    """Whose work it is: a consumer token ``/USER`` submits as USER; an admin (or a
    token for ``/``) names the user, default ``admin``."""
    if p.kind == "consumer" and p.consumer not in (None, "/"):
        own = (p.consumer or "/").strip("/").split("/")[0]
        if asked is not None and asked != own:
            raise HTTPException(403, f"{p.name} may not submit work as user {asked}")
        return own
    return asked or "admin"


def _job(m: DuccMaster, p: Principal, jid: int, kind: str | None) -> JobPub:
    j = m.jobs.get(jid)
    if j is None or (kind is not None and j.kind != kind):
        raise HTTPException(404, f"no {kind or 'job'} {jid}")
    require_consumer(p, f"/{j.user}")
    return j


async def _submit(c: Caller, kind: str, body: Any, work: list[Any], argv: list[str], env: dict[str, str],
                  cwd: str | None, max_processes: int | None, threads: int, retries: int) -> Response:
    m = _ducc(c.m)
    who = _user_of(c.p, body.user)
    m.check_work(kind, body.class_, body.memory)  # a quick refusal before queueing; the task checks again
    j = await run(m, m.op_submit(kind, who, body.class_, body.memory, max_processes, threads, work, argv, env,
                                 cwd, retries))
    return answer(m.job_json(j), 201)


def _list(m: DuccMaster, p: Principal, kind: str, user_: str | None, state: str | None) -> list[dict[str, Any]]:
    return [m.job_json(j) for j in m.jobs.values()
            if j.kind == kind and p.may_see(f"/{j.user}") and (user_ is None or j.user == user_)
            and (state is None or j.state == state)]


# -- jobs -----------------------------------------------------------------------------------------
@router.post("/jobs", status_code=201)
async def submit_job(body: JobIn, c: Caller = Depends(user)) -> Response:
    """A job: up to ``max_processes`` processes of ``memory`` GB, each working through the
    job's ``work`` items ``threads`` at a time (the work loop of ``apportion.client.work``)."""
    return await _submit(c, "job", body, body.work, body.argv, body.env, body.cwd, body.max_processes,
                         body.threads, body.retries)


@router.post("/jobs/{jid}/work")
async def work(jid: int, body: WorkIn, c: Caller = Depends(worker)) -> Response:
    """A process of the job reports items ``done`` and ``failed`` and gets up to ``want``
    more (at most ``threads`` held at once). ``more`` false: the job has nothing left for
    it (it has ended, or this process is being evicted): the process should exit."""
    m = _ducc(c.m)
    p = c.p
    share = body.process if body.process is not None else p.share
    if share is None:
        raise ApiError(422, "process: name the process (an admin token has none of its own)")
    if p.kind == "process" and (p.job != jid or p.share != share):
        raise HTTPException(403, f"{p.name} may not fetch or report work of process {share} of job {jid}")
    out = await run(m, m.op_work(jid, share, list(body.done), [(f.item, f.error) for f in body.failed],
                                 body.want))
    return answer(out)


# -- reservations ---------------------------------------------------------------------------------
@router.post("/reservations", status_code=201)
async def reserve(body: ReservationIn, c: Caller = Depends(user)) -> Response:
    """A whole machine of the order ``memory`` asks for (a RESERVE class), or a managed
    reservation's share (FIXED_SHARE). ``host`` is null while it waits for a machine."""
    return await _submit(c, "reservation", body, [], [], {}, None, 1, 1, 0)


# -- services -------------------------------------------------------------------------------------
@router.post("/services", status_code=201)
async def start_service(body: ServiceIn, c: Caller = Depends(user)) -> Response:
    """One process in a FIXED_SHARE (or RESERVE) class, started again whenever it exits."""
    return await _submit(c, "service", body, [], body.argv, body.env, body.cwd, 1, 1, 0)


# -- list, view, cancel: the same for each kind ------------------------------------------------------
def _kind_routes(kind: str, plural: str, ended: str) -> None:
    async def listed(user: str | None = None, state: str | None = None, c: Caller = Depends(user)) -> Response:
        return answer({plural: _list(_ducc(c.m), c.p, kind, user, state)})

    async def one(jid: int, c: Caller = Depends(user)) -> Response:
        m = _ducc(c.m)
        return answer(m.job_json(_job(m, c.p, jid, kind)))

    async def cancel(jid: int, c: Caller = Depends(user)) -> Response:
        m = _ducc(c.m)
        _job(m, c.p, jid, kind)
        j = await run(m, m.op_cancel(jid, kind))
        return answer(m.job_json(j))

    router.add_api_route(f"/{plural}", listed, methods=["GET"], summary=f"List {plural} (of a user, in a state)")
    router.add_api_route(f"/{plural}/{{jid}}", one, methods=["GET"], summary=f"One {kind}")
    router.add_api_route(f"/{plural}/{{jid}}", cancel, methods=["DELETE"], summary=ended)


_kind_routes("job", "jobs", "Cancel a job: its processes are stopped (SIGTERM, then SIGKILL after kill_grace)")
_kind_routes("reservation", "reservations", "Give a reservation back")
_kind_routes("service", "services", "Stop a service")


# -- operations -----------------------------------------------------------------------------------
@router.get("/occupancy")
async def occupancy(c: Caller = Depends(user)) -> Response:
    """Per machine, as DUCC's rm_qoccupancy: its order, free quanta and the shares on it by job."""
    return answer({"machines": _ducc(c.m).occupancy()})


@router.post("/reconfigure")
async def reconfigure(c: Caller = Depends(admin)) -> dict[str, Any]:
    """Read the DUCC files the plan in force names again and put them in force under
    running work (shares that no longer belong where they run are blacklisted)."""
    m = _ducc(c.m)
    version = await run(m, m.op_apply_plan(m.plan_text, c.p.name))
    return {"version": version}
