"""A real master and real agents for the Dask tests: each test gets its own, on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.service.live import Master, Proc, reap, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: pool, select: "select(slots > 0)"}
consumers:
  - {path: /dask, share_ratio: 1, grace: 30}
  - {path: /web, share_ratio: 3, grace: 30}
"""
HOSTS = ("h1", "h2")
SLOTS = 2


@dataclass
class Pool:
    """A master with agents h1 and h2 (2 slots each), and what the tests ask of it."""

    master: Master
    agents: dict[str, Proc] = field(default_factory=dict)

    def get(self, path: str, **params: Any) -> Any:
        with self.master.http() as c:
            r = c.get(path, params=params)
            r.raise_for_status()
            return r.json()

    def allocation(self, aid: int) -> dict[str, Any]:
        return self.get(f"/v1/allocations/{aid}")

    def activities(self, aid: int) -> list[dict[str, Any]]:
        return self.get("/v1/activities", allocation=aid)["activities"]

    def events(self, client: int) -> list[dict[str, Any]]:
        return self.get(f"/v1/clients/{client}/events", after=0, wait=0)["events"]

    def forced(self, aid: int) -> list[dict[str, Any]]:
        """Activities of ``aid`` whose process was sent a signal or died of one."""
        return [a for a in self.activities(aid)
                if a["state"] == "killed" or a["signal"] is not None or a["stop_reason"] is not None]


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Pool]:
    m = start_master(tmp_path / "master", PLAN)
    p = Pool(m)
    try:
        for name in HOSTS:
            p.agents[name] = start_agent(m, name, tmp_path / name, slots=SLOTS)
        wait_until(lambda: sorted(h["name"] for h in p.get("/v1/hosts")["hosts"] if h["state"] == "ok")
                   == list(HOSTS), 30, "both agents up")
        yield p
    finally:
        for a in p.agents.values():
            a.kill()
        m.proc.kill()
        reap()
