"""The work loop of a DUCC job's process.

The master started this process on a share of its job and told it, in its
environment, where the master is (``APPORTION_MASTER``), its job
(``APPORTION_JOB``), its process (``APPORTION_PROCESS``), how many items it may
hold at once (``APPORTION_THREADS``) and a token that may fetch and report this
process's work and nothing else (``APPORTION_TOKEN``).

Two ways to work through the items::

    for item in apportion.client.work():      # one at a time
        handle(item)                           # done when the loop comes round again

    apportion.client.serve(handle)             # ``threads`` at a time, on threads

With ``work()``, an item is reported done when the loop asks for the next one;
call ``.fail(reason)`` on the loop object inside the body to report the current
item failed instead (the master tries it again elsewhere, up to the job's
``retries``). With ``serve(fn)``, an item whose ``fn`` raises is reported failed
with the exception. Reports travel with the next request for items. Both end
when the job has nothing left for this process (it has ended, or this process is
being evicted); the process should then exit.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

IDLE_WAIT = 0.2  # items are in flight elsewhere and may come back: ask again after this (growing to 2 s)


# How long a job's process waits for its master to answer again (a restart, a failover)
# before it gives up. A process that gave up after the SDK's default 10 s, while a loaded
# master restarted, ended before it had initialised, and three such ends fail the job.
MASTER_WAIT = 120.0


class Work:
    """This process's work items, one at a time (iterate over it once)."""

    def __init__(self, client: Any = None, job: int | None = None, process: int | None = None) -> None:
        from apportion.client._sync import Client

        self.client = client if client is not None else Client(retry_for=MASTER_WAIT)
        self.job = int(job if job is not None else os.environ["APPORTION_JOB"])
        self.process = int(process if process is not None else os.environ["APPORTION_PROCESS"])
        self.done: list[int] = []
        self.failed: list[tuple[int, str]] = []
        self.count = 0  # items this process has finished (done or failed)
        self._current: int | None = None
        self._current_failed = False

    def exchange(self, want: int | None = None) -> tuple[list[tuple[int, Any]], bool]:
        """Report what is finished, take up to ``want`` more: (items, whether more may come)."""
        answer = self.client.fetch_work(self.job, self.process, done=self.done, failed=self.failed, want=want)
        self.done, self.failed = [], []
        return [(x["id"], x["data"]) for x in answer["items"]], bool(answer["more"])

    def fail(self, reason: object = "") -> None:
        """The current item failed (``reason``: an exception or a text)."""
        if self._current is None:
            raise RuntimeError("fail() is called inside the loop's body, for the item it handles")
        self._current_failed = True
        self._reason = _describe(reason)

    def _finish(self) -> None:
        if self._current is None:
            return
        if self._current_failed:
            self.failed.append((self._current, self._reason))
        else:
            self.done.append(self._current)
        self.count += 1
        self._current, self._current_failed = None, False

    def __iter__(self) -> Iterator[Any]:
        queue: list[tuple[int, Any]] = []
        pause = IDLE_WAIT
        try:
            while True:
                if not queue:
                    got, more = self.exchange(want=1)
                    queue.extend(got)
                    if not queue:
                        if not more:
                            return
                        time.sleep(pause)
                        pause = min(2.0, pause * 1.5)
                        continue
                    pause = IDLE_WAIT
                self._current, data = queue.pop(0)
                yield data
                self._finish()
        finally:
            if self.done or self.failed:
                try:
                    self.exchange(want=0)
                except Exception:  # noqa: BLE001 - the master gives unreported items to others
                    pass


def _describe(reason: object) -> str:
    if isinstance(reason, BaseException):
        return "".join(traceback.format_exception_only(reason)).strip()[:2000]
    return str(reason)[:2000]


def work(client: Any = None, *, job: int | None = None, process: int | None = None) -> Work:
    """This process's work items, one at a time (see the module doc)."""
    return Work(client, job, process)


def serve(fn: Callable[[Any], Any], *, threads: int | None = None, client: Any = None, job: int | None = None,
          process: int | None = None) -> int:
    """Run ``fn(item)`` over this process's items, ``threads`` at a time (default
    ``APPORTION_THREADS``, else 1); an item whose ``fn`` raises is reported failed.
    Returns how many items this process finished."""
    w = Work(client, job, process)
    n = threads if threads is not None else int(os.environ.get("APPORTION_THREADS", "1"))
    lock = threading.Lock()
    running: dict[Future, int] = {}
    pause = IDLE_WAIT
    with ThreadPoolExecutor(max_workers=max(1, n)) as pool:
        more = True
        while True:
            with lock:
                got, more = w.exchange(want=max(0, n - len(running)))
            for item_id, data in got:
                running[pool.submit(fn, data)] = item_id
            if not running:
                if not more:
                    return w.count
                time.sleep(pause)
                pause = min(2.0, pause * 1.5)
                continue
            pause = IDLE_WAIT
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for f in finished:
                item_id = running.pop(f)
                error = f.exception()
                with lock:
                    if error is None:
                        w.done.append(item_id)
                    else:
                        w.failed.append((item_id, _describe(error)))
                    w.count += 1
            if not more and not running:
                w.exchange(want=0)
                return w.count
