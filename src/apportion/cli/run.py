"""``apportion run``: run a command on slots of a consumer's share, like ``srun``.

It registers a client, asks for ``--slots`` slots (all at once: min = max), waits for the
grant with a progress line, starts the command once on each granted slot (an activity
each), streams their output prefixed by host (from the output tail the master keeps of
each activity), passes Ctrl-C, SIGTERM and SIGHUP on as a stop, and deletes the allocation
and the client when the commands have ended. It exits with the commands' worst exit code
(a command ended by signal N counts as 128 + N, one that failed to start or was lost as 1);
stopped by signal N (Ctrl-C is SIGINT, 2; `timeout` and service managers send SIGTERM, 15;
a closed terminal SIGHUP, 1) it exits 128 + N once everything is stopped, as a shell
reports a command a signal ended; a reclaim of any of its slots stops the commands and
exits 75 (EX_TEMPFAIL: the share was wanted elsewhere, try again later), saying so.
``--walltime`` says how long the command runs once started (service/walltimes.py); while
the slots wait with a reservation, the progress line says so, with the planned start.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from apportion.client._errors import ApportionError

if TYPE_CHECKING:
    from apportion.client import Client

RECLAIMED = 75
INTERRUPTED = 130  # 128 + SIGINT
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # each stops the commands and releases everything
ENDED = ("exited", "killed", "failed", "lost")
POLL = 0.2


@dataclass
class Task:
    """One started command: its activity, host and the output already printed."""

    id: int
    host: str
    seen: dict[str, list[str]] = field(default_factory=lambda: {"stdout": [], "stderr": []})
    state: str = "starting"
    code: int | None = None


def new_lines(old: list[str], new: list[str]) -> list[str]:
    """The lines of ``new`` not yet shown: the master keeps a tail of the output, so ``new``
    may have lost lines at its start; it continues the longest end of ``old`` it begins with."""
    for k in range(min(len(old), len(new)), 0, -1):
        if old[-k:] == new[:k]:
            return new[k:]
    return new


def exit_code(a: dict[str, Any]) -> int:
    if a.get("exit_code") is not None:
        return int(a["exit_code"])
    if a.get("signal"):
        return 128 + int(a["signal"])
    return 1  # failed to start, or lost with its host


class Runner:
    def __init__(self, api: Client, consumer: str, group: str | None, slots: int, select: str | None,
                 argv: list[str], out: Any = sys.stdout, err: Any = sys.stderr,
                 resources: dict[str, Any] | None = None, walltime: float | None = None) -> None:
        self.api, self.consumer, self.group, self.slots, self.select = api, consumer, group, slots, select
        self.resources, self.walltime = resources, walltime
        self.argv, self.out, self.err = argv, out, err
        self.client: int | None = None
        self.alloc: int | None = None
        self.tasks: list[Task] = []
        self.after = 0
        self.stopped_by: int | None = None  # the first stopping signal's number
        self.cleaning = False
        self.reclaimed: str | None = None

    @property
    def interrupted(self) -> bool:
        return self.stopped_by is not None

    @property
    def stop_code(self) -> int:
        """The exit status after a stopping signal: 128 + its number, as a shell reports it."""
        return 128 + (self.stopped_by or signal.SIGINT)

    def say(self, text: str, end: str = "\n") -> None:
        self._write(self.err, text + end)

    def _write(self, target: Any, text: str) -> None:
        """Write and flush; a terminal that was closed (the SIGHUP case: writes fail with EIO)
        or a reader that went away must not stop the clean-up, so the stream goes to /dev/null."""
        try:
            target.write(text)
            target.flush()
        except (OSError, ValueError):
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, target.fileno())
                os.close(null)
            except (OSError, ValueError, AttributeError):
                pass

    # -- the steps ----------------------------------------------------------------------
    def run(self) -> int:
        old = {s: signal.signal(s, self._interrupt) for s in STOPS}
        try:
            name = f"run-{socket.gethostname()}-{os.getpid()}-{int(time.time())}"
            self.client = self.api.register(name, self.consumer)
            a = self.api.allocate(self.consumer, self.group, self.slots, self.slots, requirement=self.select,
                                  resources=self.resources, walltime=self.walltime)
            self.alloc = int(a["id"])
            hosts = self._wait_for_grant()
            if hosts is None:
                return self.stop_code
            for host, n in sorted(hosts.items()):
                for _ in range(n):
                    if self.interrupted:
                        break  # stopped while starting: start no more, stop those started
                    act = self.api.start_activity(self.alloc, host, self.argv)
                    self.tasks.append(Task(int(act["id"]), host))
            return self._follow()
        finally:
            self.cleaning = True
            self._clean_up()
            for s, h in old.items():
                signal.signal(s, h)

    def _interrupt(self, signum: int, frame: Any) -> None:
        if self.cleaning:  # releasing the allocation and the client already: let it finish
            return
        if self.interrupted:  # a second stop: stop waiting for the commands (the clean-up still runs)
            raise KeyboardInterrupt
        self.stopped_by = signum
        if signum == signal.SIGINT:
            self.say("\ninterrupted: stopping the commands (Ctrl-C again to stop waiting)")
        else:
            self.say(f"\n{signal.Signals(signum).name} received: stopping the commands"
                     " (the same signal again to stop waiting)")

    def _wait_for_grant(self) -> dict[str, int] | None:
        from apportion.cli.live import _reservation_text

        tty = self.err.isatty()
        last = None
        while not self.interrupted:
            a = self.api.allocation(self.alloc)
            line = f"waiting for {self.slots} slot(s) of {self.consumer}: {a['held']} granted"
            if a.get("reserved"):
                line += f" ({_reservation_text(a)})"
            if a["held"] >= self.slots:
                self.say(("\r" if tty else "") + f"granted {a['held']} slot(s): "
                         + ", ".join(f"{h}:{n}" for h, n in sorted(a["hosts"].items())))
                return dict(a["hosts"])
            if line != last:
                self.say(("\r" if tty else "") + line, end="" if tty else "\n")
                last = line
            self._events(wait=0.5)
        return None

    def _events(self, wait: float = 0.0) -> None:
        for e in self.api.poll_events(self.client, self.after, wait=wait):
            self.after = max(self.after, e["id"])
            if e.get("allocation") == self.alloc and e["type"] == "reclaim" and self.reclaimed is None:
                self.reclaimed = (f"{e['slots']} slot(s) on {e['host']} reclaimed for {e.get('for')}"
                                  f" ({e.get('reason') or 'its share'})")

    def _follow(self) -> int:
        stopping = False
        while True:
            self._events()
            if (self.interrupted or self.reclaimed) and not stopping:
                stopping = True
                if self.reclaimed:
                    self.say(f"reclaimed: {self.reclaimed}; stopping the commands")
                for t in self.tasks:
                    if t.state not in ENDED:
                        try:
                            self.api.kill_activity(t.id)
                        except ApportionError:
                            pass  # it ended meanwhile
            live = self._poll()
            if not live:
                break
            time.sleep(POLL)
        if self.reclaimed:
            self.say(f"ended by a reclaim of its share: {self.reclaimed}")
            return RECLAIMED
        if self.interrupted:
            return self.stop_code
        return max((t.code if t.code is not None else 1 for t in self.tasks), default=0)

    def _poll(self) -> int:
        """Print new output and note ended commands: -> how many still run."""
        acts = {a["id"]: a for a in self.api.activities(self.alloc)}
        live = 0
        for t in self.tasks:
            a = acts.get(t.id) or self.api.activity(t.id)
            if t.state not in ENDED:
                out = self.api.activity_output(t.id)
                for stream, target in (("stdout", self.out), ("stderr", self.err)):
                    text = "".join(f"[{t.host}] {line}\n" for line in new_lines(t.seen[stream],
                                                                                  out.get(stream) or []))
                    t.seen[stream] = list(out.get(stream) or [])
                    if text:
                        self._write(target, text)
            t.state = a["state"]
            if t.state in ENDED:
                if t.code is None:
                    t.code = exit_code(a)
                    if a.get("stop_reason") and t.state == "failed":
                        self.say(f"[{t.host}] failed: {a['stop_reason']}")
            else:
                live += 1
        return live

    def _clean_up(self) -> None:
        from apportion.client._call import Call

        try:
            if self.alloc is not None:
                self.api.delete(self.alloc)
            if self.client is not None:
                self.api._send(Call("DELETE", f"/v1/clients/{int(self.client)}"))
        except ApportionError as e:
            self.say(f"warning: could not release everything: {e}")


def run(command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
        consumer: Annotated[str, typer.Option("--consumer", help="The consumer whose share it runs on.")],
        group: Annotated[str | None, typer.Option("--group", help="A resource group (default: the consumer's).")]
        = None,
        slots: Annotated[int, typer.Option("--slots", min=1, help="Slots to run on: the command starts once on each.")]
        = 1,
        host_select: Annotated[str | None, typer.Option(
            "--host-select", help="Only hosts this requirement selects, e.g. 'select(mem > 8)'.")] = None,
        walltime: Annotated[float | None, typer.Option(
            "--walltime", help="Seconds the command runs once started, if known: a reservation's planned start "
            "is made of such times, and a short job may start early on slots kept for a wider one "
            "(backfill). Nothing stops the command past it.")] = None,
        resources: Annotated[str | None, typer.Option(
            "--resources", help="What each slot needs, e.g. cores=8,memory=64,gpus=1,gpu_model=A100 (memory in "
            "GB; gpus=0.5 shares a device; any other name is a custom kind the agents report, e.g. fpga=1). "
            "Each command sees only its GPUs in CUDA_VISIBLE_DEVICES.")] = None,
        master: Annotated[str | None, typer.Option("--master", envvar="APPORTION_MASTER",
                                                   help="The master's URL (default http://127.0.0.1:8470).")] = None,
        token_file: Annotated[Path | None, typer.Option("--token-file", help="A file holding the token.")] = None,
        ) -> None:
    """Run COMMAND on --slots slots of --consumer's share and stream its output prefixed by host.

    Exits with the commands' worst exit code; 128 + N after signal N stopped it (130 after
    Ctrl-C, 143 after SIGTERM, 129 after SIGHUP: the commands are stopped and everything
    released first); 75 when a reclaim took any of its slots (the commands are stopped);
    1 when the master refuses; 3 with no master."""
    from apportion.cli.live import _client, _fail

    from apportion.client import parse_resources
    from apportion.client._calls import walltime_of

    if not command:
        raise typer.BadParameter("name the command to run after --", param_hint="COMMAND")
    try:
        walltime = walltime_of(walltime) if walltime is not None else None
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--walltime") from None
    try:
        need = parse_resources(resources) if resources is not None else None
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--resources") from None
    with _client(master, token_file) as api:
        runner = Runner(api, consumer, group, slots, host_select, list(command), resources=need, walltime=walltime)
        try:
            code = runner.run()
        except ApportionError as e:
            raise _fail(e) from None
        except KeyboardInterrupt:
            code = runner.stop_code
    raise typer.Exit(code)
