"""One agent's conversation with the master: register, then heartbeats as long polls.

Every heartbeat reports every activity not yet forgotten; the answer's commands are applied at
once and the next heartbeat follows straight away, so a start is reported running in the next
request. When a process ends, an extra heartbeat with wait 0 goes out beside the long poll, so
the master hears of the exit at once. A lost connection, or a 404/409 answer, means register
again; failures are retried with a backoff that grows to 1 s.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from apportion.agent.facts import HostFacts
from apportion.agent.link import MasterLink, MasterUnreachable, Refused, Unregistered
from apportion.agent.protocol import HostReporting, Json, OutputMark, Runner, Start

log = logging.getLogger("apportion.agent")

DEFAULT_HEARTBEAT = 1.0
DEFAULT_KILL_GRACE = 10.0
POLL_INTERVAL = 0.05  # how often processes are looked at
_SLACK = 10.0  # beyond a heartbeat's wait before the request is given up
_BACKOFF = (0.1, 1.0)


class Agent:
    def __init__(self, name: str, facts: HostFacts, runner: Runner, link: MasterLink,
                 heartbeat: float | None = None, watch: bool = True) -> None:
        self.name = name
        self.facts = facts
        self.runner = runner
        self.link = link
        self.fixed_heartbeat = heartbeat  # given by the operator: wins over the master's
        self.interval = heartbeat or DEFAULT_HEARTBEAT
        self.kill_grace = DEFAULT_KILL_GRACE
        self.watch = watch
        self.registered = False
        self.sent: dict[int, OutputMark] = {}
        self._quick_empty = 0  # heartbeats in a row answered at once with nothing to do
        self._kick = asyncio.Event()
        self._stopping = asyncio.Event()
        self._path = f"/v1/agents/{name}"

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._talk())]
        if self.watch:
            tasks += [asyncio.create_task(self._watch()), asyncio.create_task(self._extra_heartbeats())]
        try:
            await self._stopping.wait()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _talk(self) -> None:
        delay = _BACKOFF[0]
        problem = ""
        while True:
            try:
                if not self.registered:
                    await self.register()
                await self.heartbeat(self.interval)
                if problem:
                    log.info("%s: master %s answers again", self.name, self.link.url)
                    problem = ""
                delay = _BACKOFF[0]
                continue
            except Unregistered as e:
                if self.registered:
                    self.registered = False
                    continue  # register again at once
                now = f"master refused the register ({e})"
            except MasterUnreachable as e:
                self.registered = False
                now = f"master unreachable ({e})"
            except Refused as e:
                now = f"master refused: {e}"
            except Exception as e:  # noqa: BLE001 - an agent keeps going: a malformed answer, a full disk
                now = f"{type(e).__name__}: {e}"
                if now != problem:
                    log.exception("%s: unexpected error", self.name)
            if now != problem:
                log.warning("%s: %s; retrying", self.name, now)
                problem = now
            await asyncio.sleep(delay)
            delay = min(_BACKOFF[1], delay * 2)

    async def register(self) -> None:
        body = self.facts.as_json() | {"activities": self.runner.known()}
        if isinstance(self.runner, HostReporting):
            body |= self.runner.describe()  # containment, run_as
        answer = await self.link.post(self._path + "/register", body, timeout=_SLACK)
        self.kill_grace = float(answer.get("kill_grace", self.kill_grace))
        self._take_interval(answer)
        self.sent.clear()  # the master may have lost what it was sent: send the output again
        self.registered = True
        log.info("%s: registered with %s (%d activities running)", self.name, self.link.url,
                 sum(a["state"] == "running" for a in body["activities"]))

    async def heartbeat(self, wait: float) -> None:
        activities, marks = self.runner.reports(self.sent)
        began = asyncio.get_running_loop().time()
        body: Json = {"wait": wait, "activities": activities}
        if isinstance(self.runner, HostReporting):
            body["host"] = self.runner.host_report()  # alien processes
        answer = await self.link.post(self._path + "/heartbeat", body, timeout=wait + _SLACK)
        self.sent.update(marks)
        self._take_interval(answer)
        commands = answer.get("commands") or []
        self.apply(commands)
        elapsed = asyncio.get_running_loop().time() - began
        # One quick empty answer happens (an extra heartbeat woke the long poll); three in a row
        # mean a master that does not hold the poll, and it is not to be asked in a busy loop.
        self._quick_empty = self._quick_empty + 1 if not commands and elapsed < wait / 10 else 0
        if self._quick_empty >= 3:
            await asyncio.sleep(wait - elapsed)

    def apply(self, commands: list[Json]) -> None:
        for c in commands:
            op = c.get("op")
            try:
                activity = int(c["activity"])
            except (KeyError, TypeError, ValueError):
                log.warning("%s: a %r command without an activity id", self.name, op)
                continue
            try:
                self._apply_one(op, activity, c)
            except Exception:  # noqa: BLE001 - one command's trouble must not keep the others from being done
                log.exception("%s: the %r command for activity %d failed", self.name, op, activity)

    def _apply_one(self, op: Any, activity: int, c: Json) -> None:
        if op == "start":
            try:
                cmd = Start.from_json(c)
            except (KeyError, TypeError, ValueError) as e:
                self.runner.fail(activity, f"a start it cannot read: {e}")
            else:
                self.runner.start(cmd, self.name)
        elif op == "stop":
            self.runner.stop(activity, float(c.get("kill_grace", self.kill_grace)))
        elif op == "forget":
            self.runner.forget(activity)
            self.sent.pop(activity, None)
        else:
            log.warning("%s: unknown command %r", self.name, op)

    def _take_interval(self, answer: Json) -> None:
        if self.fixed_heartbeat is None and isinstance(answer.get("heartbeat"), (int, float)):
            self.interval = max(0.05, float(answer["heartbeat"]))

    async def _watch(self) -> None:
        while True:
            try:
                if self.runner.poll():
                    self._kick.set()
            except OSError as e:  # the state file could not be written: try again at the next poll
                log.warning("%s: %s", self.name, e)
            await asyncio.sleep(POLL_INTERVAL)

    async def _extra_heartbeats(self) -> None:
        while True:
            await self._kick.wait()
            self._kick.clear()
            if self.registered:
                try:
                    await self.heartbeat(0.0)
                except Exception:  # noqa: BLE001 - the long poll's loop deals with the master and says why
                    pass
