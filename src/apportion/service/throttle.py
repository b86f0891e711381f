"""Calls refused before authentication: counted, summed up in the log, limited per address.

A call refused before its caller was known (no token or an unknown one: 401; a body too
large before anyone was authenticated: 413; a path that does not exist: 404) costs the
master nothing durable: it is not written to the audit (which records what known callers
did or tried), it is counted in the Prometheus metrics and summed up in the log at most
once every ``LOG_EVERY`` seconds.

``Limiter`` counts those refusals per client address in a fixed window (``window``
seconds from the address's first refusal). Past ``limit`` refusals in its window, the
address's calls that carry no valid token are answered 429 with ``Retry-After`` (the
seconds until its window ends) before their body is read; a call with a valid token from
the same address goes on as usual, so one misbehaving process cannot lock out the agents
and clients that share its address (a host, a NAT, a reverse proxy). This is the shape of
fail2ban's ``maxretry`` in ``findtime`` and of nginx's ``limit_req`` answering 429,
applied only to callers that could not authenticate.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass

DEFAULT_LIMIT = 100  # refusals before authentication per address per window
DEFAULT_WINDOW = 60.0  # seconds
MAX_ADDRESSES = 10_000  # addresses followed at once; beyond, the oldest windows are forgotten
LOG_EVERY = 10.0  # seconds between two summary lines

log = logging.getLogger("apportion.server")


@dataclass(slots=True)
class _Window:
    ends: float
    count: int


class Limiter:
    """Refusals before authentication per address, in fixed windows; ``limit`` 0: no limit."""

    def __init__(self, limit: int = DEFAULT_LIMIT, window: float = DEFAULT_WINDOW,
                 clock=time.monotonic) -> None:  # noqa: ANN001 - a () -> float
        self.limit, self.window, self.clock = limit, window, clock
        self.windows: dict[str, _Window] = {}

    def refused(self, address: str) -> None:
        """Count one refusal before authentication from ``address``."""
        if self.limit <= 0:
            return
        now = self.clock()
        w = self.windows.get(address)
        if w is None or w.ends <= now:
            if w is None and len(self.windows) >= MAX_ADDRESSES:
                self._forget(now)
            self.windows[address] = _Window(now + self.window, 1)
        else:
            w.count += 1

    def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may be refused again with a 401 rather than a 429: None
        while it is within its limit."""
        if self.limit <= 0:
            return None
        w = self.windows.get(address)
        if w is None:
            return None
        now = self.clock()
        if w.ends <= now:
            del self.windows[address]
            return None
        return max(1, math.ceil(w.ends - now)) if w.count >= self.limit else None

    def over(self) -> int:
        """How many addresses are over their limit now."""
        now = self.clock()
        return sum(1 for w in self.windows.values() if w.ends > now and w.count >= self.limit)

    def _forget(self, now: float) -> None:
        for a in [a for a, w in self.windows.items() if w.ends <= now]:
            del self.windows[a]
        while len(self.windows) >= MAX_ADDRESSES:  # all still current: the oldest go (insertion order)
            del self.windows[next(iter(self.windows))]


class Tally:
    """A rate-limited log: the first event after a quiet spell is logged at once, with what it
    was; the others are summed up in one line every ``every`` seconds while they go on."""

    def __init__(self, subject: str, metric: str, every: float = LOG_EVERY) -> None:
        self.subject, self.metric, self.every = subject, metric, every
        self.pending: Counter[str] = Counter()  # address -> events not yet logged
        self.kinds: Counter[str] = Counter()
        self.flush_at: asyncio.TimerHandle | None = None

    def note(self, address: str, kind: str, what: str) -> None:
        if self.flush_at is None:
            log.warning("%s: %s from %s (further ones are summed up every %g s; the metric %s counts them all)",
                        self.subject, what, address or "?", self.every, self.metric)
            self.flush_at = asyncio.get_running_loop().call_later(self.every, self.flush)
            return
        self.pending[address] += 1
        self.kinds[kind] += 1

    def flush(self) -> None:
        if not self.pending:
            self.flush_at = None  # quiet: the next one is logged at once
            return
        total = sum(self.pending.values())
        top, n = self.pending.most_common(1)[0]
        kinds = ", ".join(f"{k}: {c}" for k, c in sorted(self.kinds.items()))
        log.warning("%s: %d more from %d address(es) in the last %g s (%s); the most from %s (%d)",
                    self.subject, total, len(self.pending), self.every, kinds, top or "?", n)
        self.pending.clear()
        self.kinds.clear()
        self.flush_at = asyncio.get_running_loop().call_later(self.every, self.flush)
