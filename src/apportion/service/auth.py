"""Bearer tokens and their scopes, as FastAPI dependencies.

Three kinds: ``admin`` (everything), ``consumer`` (a subtree of the consumer tree:
its clients, allocations, activities and events, and reading hosts), ``agent``
(reporting for its own host, nothing else). Tokens are stored as SHA-256 digests;
a token is 32 random bytes, so a digest cannot be turned back into it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from apportion.service.master import in_subtree

_bearer = HTTPBearer(auto_error=False, description="A token from `apportion server init` or POST /v1/tokens")


@dataclass(frozen=True, slots=True)
class Principal:
    kind: str  # admin | consumer | agent
    consumer: str | None = None
    host: str | None = None

    @property
    def name(self) -> str:
        return {"admin": "admin", "consumer": f"consumer {self.consumer}", "agent": f"agent {self.host}"}[self.kind]

    def may_see(self, consumer: str) -> bool:
        return self.kind == "admin" or (self.kind == "consumer" and in_subtree(consumer, self.consumer or ""))


def _resolve(request: Request, creds: HTTPAuthorizationCredentials | None) -> Principal:
    if creds is None or creds.scheme.lower() != "bearer" or not creds.credentials:
        raise HTTPException(401, "a bearer token is required (Authorization: Bearer TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})
    cache: dict[str, Principal | None] = request.app.state.token_cache
    token = creds.credentials
    if token not in cache:
        row = request.app.state.writer.token(token)
        if len(cache) > 10_000:
            cache.clear()
        cache[token] = None if row is None else Principal(row.kind, row.consumer, row.host)
    p = cache[token]
    if p is None:
        raise HTTPException(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
    return p


async def principal(request: Request,
                    creds: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Principal:
    """Any valid token."""
    return _resolve(request, creds)


async def admin(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Principal:
    p = _resolve(request, creds)
    if p.kind != "admin":
        raise HTTPException(403, f"{p.name} may not do this: an admin token is needed")
    return p


async def user(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Principal:
    """An admin or a consumer token (agents report, they do not allocate)."""
    p = _resolve(request, creds)
    if p.kind == "agent":
        raise HTTPException(403, f"{p.name} may only report for its host")
    return p


def require_consumer(p: Principal, consumer: str) -> None:
    if not p.may_see(consumer):
        raise HTTPException(403, f"{p.name} may not act for consumer {consumer}")


def require_host(p: Principal, host: str) -> None:
    if not (p.kind == "admin" or (p.kind == "agent" and p.host == host)):
        raise HTTPException(403, f"{p.name} may not report for host {host}")
