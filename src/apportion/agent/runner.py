"""Activities as real processes: each in its own process group, stopped by SIGTERM then SIGKILL.

Output goes to WORKDIR/activities/ID/stdout and stderr; that directory is also the activity's
working directory unless the master names one. The state file (statefile.py) keeps what runs,
so a runner made again on the same work directory (after the agent restarted) adopts the
processes that are still alive and reports the others as exited with no code.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from apportion.agent import statefile, tails
from apportion.agent.groups import group_alive, is_alive, process_create_time, signal_group
from apportion.agent.protocol import Json, OutputMark, Start
from apportion.agent.statefile import Entry

log = logging.getLogger("apportion.agent")

# Output characters one heartbeat carries at most (beyond the one activity that crosses the line);
# the master takes bodies of up to 1 MiB.
OUTPUT_BUDGET = 256 * 1024
# Never handed on to an activity: the agent's own credentials.
_PRIVATE_ENV = ("APPORTION_TOKEN",)


@dataclass
class _Live:
    """What the runner knows of a process beyond its state-file entry."""

    proc: subprocess.Popen[bytes] | None  # None for a process adopted after a restart
    kill_at: float | None = None  # monotonic time of the SIGKILL, once a stop came
    sent: int | None = None  # the last signal the runner sent the group
    leader_status: tuple[str, int | None, int | None] | None = None  # the leader's end, once reaped


class ProcessRunner:
    def __init__(self, workdir: Path, masters: list[str] | None = None) -> None:
        self.workdir = workdir
        self.masters = list(masters or [])  # told to the processes (APPORTION_MASTER): DUCC's work loop calls it
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)  # output may hold secrets
        self.entries: dict[int, Entry] = statefile.load(workdir)
        self.live: dict[int, _Live] = {}
        for aid, e in self.entries.items():
            if e.state != "running":
                continue
            if is_alive(e.pid, e.create_time):
                self.live[aid] = _Live(proc=None)
                log.info("activity %d: adopted pid %d", aid, e.pid)
            else:
                e.state, e.exit_code, e.signal = "exited", None, None
                log.info("activity %d: pid %d is gone", aid, e.pid)
        self._save()

    def activity_dir(self, activity: int) -> Path:
        return self.workdir / "activities" / str(activity)

    def running(self) -> list[Json]:
        return [{"id": aid, "pid": e.pid} for aid, e in sorted(self.entries.items()) if e.state == "running"]

    def start(self, cmd: Start, host: str) -> None:
        if cmd.activity in self.entries:
            return  # start is idempotent
        adir = self.activity_dir(cmd.activity)
        adir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
        if self.masters:
            env["APPORTION_MASTER"] = ",".join(self.masters)
        env.update(cmd.env)
        env.update(APPORTION_ALLOCATION="" if cmd.allocation is None else str(cmd.allocation),
                   APPORTION_HOST=host, APPORTION_SLOTS=str(cmd.slots), APPORTION_ACTIVITY=str(cmd.activity))
        try:
            with open(adir / "stdout", "ab") as out, open(adir / "stderr", "ab") as err:
                proc = subprocess.Popen(cmd.argv, cwd=cmd.cwd or adir, env=env, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=err, start_new_session=True)
        except OSError as e:
            self.fail(cmd.activity, f"apportion agent: cannot start {cmd.argv[0]!r}: {e}")
            return
        self.entries[cmd.activity] = Entry(allocation=cmd.allocation, pid=proc.pid,
                                           create_time=process_create_time(proc.pid) or 0.0, state="running")
        self.live[cmd.activity] = _Live(proc=proc)
        self._save()
        log.info("activity %d: started pid %d", cmd.activity, proc.pid)

    def fail(self, activity: int, message: str) -> None:
        if activity in self.entries:
            return
        adir = self.activity_dir(activity)
        adir.mkdir(parents=True, exist_ok=True)
        with open(adir / "stderr", "a") as err:
            err.write(message + "\n")
        self.entries[activity] = Entry(allocation=None, pid=0, create_time=0.0, state="exited", exit_code=127)
        self._save()
        log.warning("activity %d: %s", activity, message)

    def stop(self, activity: int, kill_grace: float) -> None:
        e = self.entries.get(activity)
        if e is None:
            # Never started here (or forgotten): say it ended, so the master stops asking.
            self.entries[activity] = Entry(allocation=None, pid=0, create_time=0.0, state="exited")
            self._save()
            return
        live = self.live.get(activity)
        if e.state != "running" or live is None or live.kill_at is not None:
            return  # ended already, or being stopped: a repeated stop changes nothing
        live.kill_at = time.monotonic() + max(0.0, kill_grace)
        live.sent = signal.SIGTERM
        signal_group(e.pid, signal.SIGTERM)
        log.info("activity %d: SIGTERM to group %d, SIGKILL in %gs", activity, e.pid, kill_grace)

    def forget(self, activity: int) -> None:
        e = self.entries.get(activity)
        if e is None or e.state == "running":
            return  # only an end is forgotten: a process that runs stays known until it is stopped
        del self.entries[activity]
        self._save()
        adir = self.activity_dir(activity)
        for stream in ("stdout", "stderr"):
            (adir / stream).unlink(missing_ok=True)
        try:
            adir.rmdir()  # only if the activity left nothing of its own there
        except OSError:
            pass

    def poll(self) -> bool:
        ended = False
        now = time.monotonic()
        for aid, live in list(self.live.items()):
            e = self.entries[aid]
            if live.leader_status is None:
                live.leader_status = self._leader_end(e, live)
            if live.kill_at is not None and now >= live.kill_at and group_alive(e.pid):
                signal_group(e.pid, signal.SIGKILL)
                live.sent = signal.SIGKILL
                log.info("activity %d: SIGKILL to group %d", aid, e.pid)
                live.kill_at = now  # again at the next poll if something still lives
            if live.leader_status is None:
                continue
            if live.kill_at is not None and group_alive(e.pid):
                continue  # a stop ends when the whole group is gone
            e.state, e.exit_code, e.signal = live.leader_status
            del self.live[aid]
            ended = True
            log.info("activity %d: %s (exit code %s, signal %s)", aid, e.state, e.exit_code, e.signal)
        if ended:
            self._save()
        return ended

    def _leader_end(self, e: Entry, live: _Live) -> tuple[str, int | None, int | None] | None:
        if live.proc is None:
            # Not this runner's child: its wait status is not ours to read. Gone after a signal
            # from us, it counts as killed by the last one; gone by itself, as exited, code unknown.
            if is_alive(e.pid, e.create_time):
                return None
            return ("exited", None, None) if live.sent is None else ("killed", None, int(live.sent))
        code = live.proc.poll()
        if code is None:
            return None
        return ("killed", None, -code) if code < 0 else ("exited", code, None)

    def reports(self, sent: dict[int, OutputMark]) -> tuple[list[Json], dict[int, OutputMark]]:
        out: list[Json] = []
        marks: dict[int, OutputMark] = {}
        budget = OUTPUT_BUDGET  # what is left waits for the next heartbeat: its mark is not taken
        for aid, e in sorted(self.entries.items()):
            r: Json = {"id": aid, "state": e.state}
            if e.state == "running":
                r["pid"] = e.pid
            else:
                r["exit_code"], r["signal"] = e.exit_code, e.signal
            adir = self.activity_dir(aid)
            mark = (tails.size(adir / "stdout"), tails.size(adir / "stderr"))
            if sent.get(aid) != mark and mark != (-1, -1) and budget > 0:
                r["stdout"] = tails.last_lines(adir / "stdout")
                r["stderr"] = tails.last_lines(adir / "stderr")
                marks[aid] = mark
                budget -= sum(len(line) for line in r["stdout"] + r["stderr"])
            out.append(r)
        return out, marks

    def close(self, kill: bool = False) -> None:
        """Let go of the processes (they keep running, the state file remembers them), or kill them."""
        if kill:
            for aid in list(self.live):
                signal_group(self.entries[aid].pid, signal.SIGKILL)
                proc = self.live[aid].proc
                if proc is not None:
                    proc.wait()
            self.live.clear()

    def _save(self) -> None:
        statefile.save(self.workdir, self.entries)
