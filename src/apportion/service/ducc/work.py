"""A job's work items, as the master (the job driver) hands them out.

Each item is queued, in flight on one share (process), done, or failed for good.
A process asks for items and reports each one done or failed; an item in flight
on a process that leaves (evicted, killed, lost with its host) goes back to the
front of the queue, so none is lost and, as a process reports only the items it
holds, none is counted done twice. A failed item is tried again up to the job's
``retries`` times, then it has failed for good and is reported in the job's result.

The book changes only inside the master's task; each change is also put in the
step's batch (``changed``), which the store writes in the step's transaction.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

QUEUED, FLIGHT, DONE, FAILED = "queued", "flight", "done", "failed"


@dataclass(slots=True)
class WorkBook:
    job: int
    retries: int
    items: list[Any]
    state: list[str]
    attempts: list[int]
    holder: list[int | None]  # the share that holds it in flight, or that did it
    errors: dict[int, str] = field(default_factory=dict)
    queue: deque[int] = field(default_factory=deque)
    held: dict[int, set[int]] = field(default_factory=dict)  # share -> items in flight on it
    given_at: dict[int, float] = field(default_factory=dict)  # item -> when it was handed out
    done_by: dict[int, int] = field(default_factory=dict)  # share -> items it has done
    done: int = 0
    failed: int = 0
    item_seconds: float = 0.0  # the time the done items took, summed
    changed: dict[int, tuple[str, int, int | None, str | None]] = field(default_factory=dict)

    @classmethod
    def new(cls, job: int, items: list[Any], retries: int) -> WorkBook:
        n = len(items)
        book = cls(job, retries, list(items), [QUEUED] * n, [0] * n, [None] * n)
        book.queue.extend(range(n))
        return book

    @classmethod
    def restored(cls, job: int, retries: int,
                 rows: Iterable[tuple[int, Any, str, int, int | None, str | None]]) -> WorkBook:
        book = cls(job, retries, [], [], [], [])
        for idx, item, state, attempts, share, error in rows:
            assert idx == len(book.items), "items are stored 0..n-1"
            book.items.append(item)
            book.state.append(state)
            book.attempts.append(attempts)
            book.holder.append(share)
            if error is not None:
                book.errors[idx] = error
            if state == QUEUED:
                book.queue.append(idx)
            elif state == FLIGHT and share is not None:
                book.held.setdefault(share, set()).add(idx)
            elif state == DONE:
                book.done += 1
                if share is not None:
                    book.done_by[share] = book.done_by.get(share, 0) + 1
            elif state == FAILED:
                book.failed += 1
        return book

    # -- what it says ------------------------------------------------------------------
    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def in_flight(self) -> int:
        return sum(len(s) for s in self.held.values())

    @property
    def finished(self) -> bool:
        """Every item done or failed for good."""
        return self.done + self.failed == len(self.items)

    def counts(self) -> dict[str, int]:
        return {"total": self.total, "done": self.done, "failed": self.failed, "in_flight": self.in_flight}

    def failures(self) -> list[dict[str, Any]]:
        return [{"item": i, "attempts": self.attempts[i], "error": self.errors.get(i)}
                for i in range(len(self.items)) if self.state[i] == FAILED]

    def holds(self, share: int) -> set[int]:
        return self.held.get(share, set())

    # -- changes -----------------------------------------------------------------------
    def _mark(self, i: int) -> None:
        self.changed[i] = (self.state[i], self.attempts[i], self.holder[i], self.errors.get(i))

    def give(self, share: int, n: int, now: float) -> list[int]:
        """Up to ``n`` queued items to ``share``."""
        out: list[int] = []
        while self.queue and len(out) < n:
            i = self.queue.popleft()
            self.state[i], self.holder[i] = FLIGHT, share
            self.attempts[i] += 1
            self.given_at[i] = now
            self.held.setdefault(share, set()).add(i)
            self._mark(i)
            out.append(i)
        return out

    def finish(self, share: int, i: int, now: float) -> None:
        self.held[share].discard(i)
        self.state[i] = DONE
        self.done += 1
        self.done_by[share] = self.done_by.get(share, 0) + 1
        given = self.given_at.pop(i, None)
        if given is not None:
            self.item_seconds += max(0.0, now - given)
        self._mark(i)

    def fail(self, share: int, i: int, error: str) -> None:
        self.held[share].discard(i)
        self.given_at.pop(i, None)
        self.errors[i] = error
        if self.attempts[i] > self.retries:
            self.state[i] = FAILED
            self.failed += 1
        else:
            self.state[i], self.holder[i] = QUEUED, None
            self.queue.append(i)
        self._mark(i)

    def give_back(self, share: int, crashed: str | None = None) -> int:
        """The items ``share`` held go back to the front of the queue (it left without
        reporting them). Evicted, stopped or lost with its host: the try is not counted.
        ``crashed`` (the process ended by itself with an error): it is, as a failure, so an
        item that kills every process it runs on fails for good after ``retries``."""
        back = sorted(self.held.pop(share, ()), reverse=True)
        for i in back:
            self.given_at.pop(i, None)
            if crashed is not None:
                self.held[share] = {i}
                self.fail(share, i, crashed)
                del self.held[share]
                continue
            self.state[i], self.holder[i] = QUEUED, None
            self.attempts[i] = max(0, self.attempts[i] - 1)
            self.queue.appendleft(i)
            self._mark(i)
        return len(back)

    def take_changes(self) -> dict[int, tuple[str, int, int | None, str | None]]:
        out, self.changed = self.changed, {}
        return out
