"""Hosts whose starts keep failing say so.

An agent that cannot start an activity (a NUL byte, a missing program, a refused user, a
cgroup it cannot make) reports it ``failed`` with the reason, and the activity ends there
(the agent side: agent/runner.py). The master counts, per host, the starts that failed in a
row (a start that runs sets it back to 0) and in all, with the last reason, and
``GET /v1/hosts`` shows them: a host where nothing starts is visible as such, not ``ok``
and quietly useless. Counted in memory as reports come, and rebuilt at start from the stored
activities (a failed start is an activity that ended ``failed`` without ever having had a
pid), so a restart of the master does not hide a broken host.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Failures:
    in_a_row: int = 0
    total: int = 0
    last: str | None = None
    at: float | None = None


class StartFailures:
    def __init__(self) -> None:
        self.by_host: dict[str, Failures] = {}

    def note(self, host: str, state: str, report: dict[str, Any], now: float) -> None:
        """An agent's report of an activity that was ``state`` (only starts are counted)."""
        if state != "starting":
            return
        if report.get("state") == "failed":
            f = self.by_host.setdefault(host, Failures())
            f.in_a_row += 1
            f.total += 1
            f.last = str(report.get("reason") or "the agent could not start it")[:1000]
            f.at = now
        elif report.get("state") == "running" and host in self.by_host:
            self.by_host[host].in_a_row = 0

    @classmethod
    def rebuilt(cls, activities: Iterable[Any]) -> StartFailures:
        """The counts as the stored activities give them, in the order they were created."""
        out = cls()
        for a in sorted(activities, key=lambda a: a.id):
            if a.state == "failed" and a.pid is None:
                out.note(a.host, "starting", {"state": "failed", "reason": a.stop_reason}, a.ended_at or a.created_at)
            elif a.pid is not None:
                out.note(a.host, "starting", {"state": "running"}, a.created_at)
        return out

    def forget(self, host: str) -> None:
        self.by_host.pop(host, None)

    def json(self, host: str) -> dict[str, Any]:
        f = self.by_host.get(host) or Failures()
        return {"start_failures": f.in_a_row, "start_failures_total": f.total, "last_start_failure": f.last,
                "last_start_failure_at": f.at}
