"""Bearer tokens and their scopes, as FastAPI dependencies.

Three kinds: ``admin`` (everything), ``consumer`` (a subtree of the consumer tree:
its clients, allocations, activities and events, and reading hosts), ``agent``
(reporting for its own host, nothing else). Tokens are stored as SHA-256 digests;
a token is 32 random bytes, so a digest cannot be turned back into it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request

from apportion.service.api.errors import excerpt
from apportion.service.master import ApiError, Master, in_subtree

# The bearer scheme is declared in the OpenAPI spec by app.py; a request's dependency reads
# the header itself, so each call solves one dependency, not three.


@dataclass(frozen=True, slots=True)
class Principal:
    kind: str  # admin | consumer | agent | process
    consumer: str | None = None
    host: str | None = None
    job: int | None = None  # process: the job and share whose work it may fetch and report
    share: int | None = None
    token: int | None = None  # the token's id (audit, access log)

    @property
    def name(self) -> str:
        return {"admin": "admin", "consumer": f"consumer {self.consumer}", "agent": f"agent {self.host}",
                "process": f"process {self.share} of job {self.job}"}[self.kind]

    def may_see(self, consumer: str) -> bool:
        return self.kind == "admin" or (self.kind == "consumer" and in_subtree(consumer, self.consumer or ""))


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls (their token's principal) and the master that serves them."""

    p: Principal
    m: Master


_known: dict[int, frozenset[str]] = {}  # id(route) -> the query parameters it declares (routes live as long as the app)


def check_query(request: Request) -> None:
    """A query parameter the route does not declare is a 422 naming it (``?host=h1`` on a
    path that has no such filter would otherwise list everything)."""
    route = request.scope.get("route")
    names = _known.get(id(route))
    if names is None:
        found: set[str] = set()
        todo = [getattr(route, "dependant", None)]
        while todo:
            dep = todo.pop()
            if dep is not None:
                found.update(p.alias for p in dep.query_params)
                todo.extend(dep.dependencies)
        names = _known[id(route)] = frozenset(found)
    for key in request.query_params:
        if key not in names:
            allowed = ", ".join(sorted(names)) or "none"
            raise ApiError(422, f"{excerpt(key, 40)}: unknown query parameter (this path takes: {allowed})",
                           where="query")


def principal_of(state: Any, token: str) -> Principal | None:
    """The principal of a bearer token, None for an unknown one (the app's token cache, then the store)."""
    cache: dict[str, Principal | None] = state.token_cache
    if token not in cache:
        row = state.writer.token(token)
        if len(cache) > 10_000:
            cache.clear()
        cache[token] = None if row is None else Principal(row.kind, row.consumer, row.host, row.job, row.share,
                                                            row.id)
    return cache[token]


def _resolve(request: Request) -> Principal:
    """The caller's principal (401 without a known token); first, its query checked (422)."""
    if request.scope.get("query_string"):
        check_query(request)
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(401, "a bearer token is required (Authorization: Bearer TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})
    p = principal_of(request.app.state, token)
    if p is None:
        raise HTTPException(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
    request.state.principal = p  # for the access log and the audit
    return p


def master_of(request: Request) -> Master:
    """The master, or 503 while it starts."""
    m = request.app.state.master
    if m is None or not m.ready:
        raise HTTPException(503, "the master is starting", headers={"Retry-After": "1"})
    if m.stale:  # a commit failed and the store cannot be read back yet: nothing it shows is sure
        raise HTTPException(503, f"the store cannot be read ({m.store_down})", headers={"Retry-After": "2"})
    return m


async def anyone(request: Request) -> Caller:
    """Any valid token (agents report with theirs)."""
    return Caller(_resolve(request), master_of(request))


async def admin(request: Request) -> Caller:
    p = _resolve(request)
    if p.kind != "admin":
        raise HTTPException(403, f"{p.name} may not do this: an admin token is needed")
    return Caller(p, master_of(request))


async def user(request: Request) -> Caller:
    """An admin or a consumer token (agents report, they do not allocate)."""
    p = _resolve(request)
    if p.kind == "agent":
        raise HTTPException(403, f"{p.name} may only report for its host")
    if p.kind == "process":
        raise HTTPException(403, f"{p.name} may only fetch and report its own work")
    return Caller(p, master_of(request))


async def worker(request: Request) -> Caller:
    """A process token (its own job's work) or an admin token."""
    p = _resolve(request)
    if p.kind not in ("process", "admin"):
        raise HTTPException(403, f"{p.name} may not fetch or report work: a process token is needed")
    return Caller(p, master_of(request))


def require_consumer(p: Principal, consumer: str) -> None:
    """403 outside the caller's subtree; the message names only the caller's own scope (never
    another tenant's consumer)."""
    if not p.may_see(consumer):
        raise HTTPException(403, f"{p.name} may not act outside {p.consumer or 'its scope'}")


def require_host(p: Principal, host: str) -> None:
    if not (p.kind == "admin" or (p.kind == "agent" and p.host == host)):
        raise HTTPException(403, f"{p.name} may not report for host {host}")
