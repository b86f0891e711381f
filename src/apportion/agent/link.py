"""The agent's line to the master: a list of URLs, tried in order, following the leader.

A connection error moves on to the next URL; a 503 whose JSON names a `leader` moves to it (read
as the SDK reads it: apportion.client._route.leader_of).
The token goes in the Authorization header and nowhere else (never into a log line).
"""

from __future__ import annotations

from typing import Any

import httpx

from apportion.agent.protocol import Json
from apportion.client._route import leader_of


class MasterUnreachable(Exception):
    """No URL answered (or none was the leader)."""


class Unregistered(Exception):
    """The master does not know this host (404) or wants it to register again (409)."""


class Refused(Exception):
    """Any other error answer; `status` is its HTTP status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


def _normal(url: str) -> str:
    return url.rstrip("/")


class MasterLink:
    def __init__(self, urls: list[str], token: str, client: httpx.AsyncClient) -> None:
        if not urls:
            raise ValueError("at least one master URL")
        self.urls = [_normal(u) for u in urls]
        self.current = 0
        self._headers = {"Authorization": f"Bearer {token}"}
        self.client = client

    @property
    def url(self) -> str:
        return self.urls[self.current]

    def _follow(self, leader: str) -> bool:
        leader = _normal(leader)
        if leader == self.url:
            return False
        if leader not in self.urls:
            self.urls.append(leader)
        self.current = self.urls.index(leader)
        return True

    async def post(self, path: str, body: Json, timeout: float) -> Json:
        """POST to the leader; raises MasterUnreachable, Unregistered or Refused."""
        last = "no answer"
        for _ in range(len(self.urls) + 2):
            try:
                r = await self.client.post(self.url + path, json=body, headers=self._headers, timeout=timeout)
            except httpx.TransportError as e:
                last = f"{self.url}: {type(e).__name__}"
                self.current = (self.current + 1) % len(self.urls)
                continue
            if r.status_code == 503:
                leader = leader_of(r)
                if leader and self._follow(leader):
                    continue
                last = f"{self.url}: 503 (not the leader)"
                self.current = (self.current + 1) % len(self.urls)
                continue
            if r.status_code in (404, 409):
                raise Unregistered(f"HTTP {r.status_code}")
            if r.status_code >= 400:
                raise Refused(r.status_code, str(_json(r).get("detail", r.text[:200])))
            return _json(r)
        raise MasterUnreachable(last)


def _json(r: httpx.Response) -> dict[str, Any]:
    try:
        data = r.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
