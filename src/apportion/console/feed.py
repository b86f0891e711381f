"""The console's live feed: what each committed step of the master changed.

After every step the master's task calls :meth:`Feed.on_commit` with the batch it has
just committed and published. The feed keeps:

- a change sequence with, per step, the kinds of thing it changed (``hosts``,
  ``allocations``, ``activities``, ``clients``, ``plan``, ``jobs``): a page that shows
  one of them fetches it again through ``/v1``, so what it shows stays within its
  token's scope exactly as the API's answers do;
- the latest events of every client, each with the consumer of its client, so the
  ``/v1/events`` feed gives a token only the events of its own subtree.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apportion.service.master import Master
    from apportion.service.store.writer import Batch

KEEP_EVENTS = 2_000
KEEP_CHANGES = 1_000


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    kinds: frozenset[str]


def kinds_of(batch: Batch) -> frozenset[str]:
    kinds = set()
    if batch.hosts or batch.deleted_hosts:
        kinds.add("hosts")
    if (batch.allocations or batch.deleted_allocations or batch.holdings or batch.holdings_full is not None
            or batch.fences):
        kinds.add("allocations")
    if batch.activities:
        kinds.add("activities")
    if batch.clients or batch.deleted_clients:
        kinds.add("clients")
    if batch.plan is not None:
        kinds.add("plan")
    if batch.jobs or batch.items or batch.shares:
        kinds.add("jobs")
    return frozenset(kinds)


class Feed:
    def __init__(self, m: Master) -> None:
        self.m = m
        self.seq = 0
        self.changes: deque[Change] = deque(maxlen=KEEP_CHANGES)
        self.events: deque[tuple[str | None, dict[str, Any]]] = deque(maxlen=KEEP_EVENTS)
        self._waiter = asyncio.Event()

    def on_commit(self, batch: Batch) -> None:
        kinds = kinds_of(batch)
        if batch.events:
            kinds |= {"events"}
            for client, body in batch.events:
                c = self.m.clients.get(client)
                self.events.append((c.consumer if c is not None else None, body))
        if not kinds:
            return
        self.seq += 1
        self.changes.append(Change(self.seq, kinds))
        w, self._waiter = self._waiter, asyncio.Event()
        w.set()

    def waiter(self) -> asyncio.Event:
        """Set at the next change (take it before looking, so none is missed)."""
        return self._waiter

    def since(self, seq: int) -> frozenset[str]:
        """The kinds changed after ``seq`` (everything, if that is older than the feed keeps)."""
        if self.changes and self.changes[0].seq > seq + 1:
            return frozenset({"hosts", "allocations", "activities", "clients", "plan", "jobs", "events"})
        out: set[str] = set()
        for ch in reversed(self.changes):
            if ch.seq <= seq:
                break
            out |= ch.kinds
        return frozenset(out)

    def events_after(self, after: int, visible: Any, limit: int = 500) -> list[dict[str, Any]]:
        """The kept events after id ``after`` whose consumer ``visible(consumer)`` allows (None:
        its client is gone), oldest first."""
        out = []
        for consumer, body in reversed(self.events):
            if body["id"] <= after:
                break
            if visible(consumer):
                out.append(body)
                if len(out) >= limit:
                    break
        out.reverse()
        return out
