"""Run one agent, or N light agents in one process, until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from apportion.agent import ground, users
from apportion.agent.dynamic import DynamicUsers
from apportion.agent.environment import SAFE_PATH
from apportion.agent.facts import AttributeValue, gather
from apportion.agent.light import LightRunner
from apportion.agent.link import MasterLink
from apportion.agent.loop import Agent
from apportion.agent.protocol import Runner
from apportion.agent.resources import HostResources
from apportion.agent.resources import gather as gather_resources
from apportion.agent.runner import DEFAULT_PIDS_LIMIT, DEFAULT_RETENTION, DEFAULT_UNKILLABLE_TIMEOUT, ProcessRunner
from apportion.agent.users import UserPolicy

log = logging.getLogger("apportion.agent")
_LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=4)  # the long poll and an extra heartbeat


@dataclass(frozen=True)
class AgentConfig:
    masters: list[str]
    name: str
    token: str = field(repr=False)
    slots: int | None = None
    memory: float | None = None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    workdir: Path | None = None
    heartbeat: float | None = None
    light: bool = False
    count: int = 1
    policy: UserPolicy = UserPolicy()  # who activities may run as (a root agent's --default-user and rules)
    containment: str = "auto"  # auto, cgroup-v2, cgroup-v1 or process-group (containment/select.py)
    pids_limit: int | None = DEFAULT_PIDS_LIMIT  # processes an activity may have at once
    cpu_cap: float | None = None  # cores per slot an activity may use at most (None: weights only)
    unkillable_timeout: float = DEFAULT_UNKILLABLE_TIMEOUT  # seconds past SIGKILL before "unkillable"
    retention: float = DEFAULT_RETENTION  # seconds an activity's directory stays once the master forgot it
    disk_per_slot: int | None = None  # bytes an activity's directory may take per slot (None: no limit)
    cores: int | None = None  # cores to report (default: the CPUs it may use)
    gpus: int | list[int] | None = None  # --gpus: a count or device indices (None: what NVML finds)
    custom: dict[str, int] = field(default_factory=dict)  # --resource NAME=N
    pin_cores: bool = False  # each activity gets a cpuset of its cores
    dev_dir: Path = Path("/dev")  # where the GPUs' device nodes are (nvidia<minor>)
    path: str = SAFE_PATH  # the PATH activities get unless they declare one

    def names(self) -> list[str]:
        return [self.name] if self.count == 1 else [f"{self.name}-{i}" for i in range(self.count)]

    def base_dir(self) -> Path:
        """The work directory, or the one above the N agents' own: where the dynamic uids are kept."""
        return self.workdir or Path("apportion-agent") / self.name

    def workdir_of(self, name: str) -> Path:
        base = self.base_dir()
        return base if self.count == 1 else base / name


ACTIVITIES = "activities"  # WORKDIR/activities/ID: each activity's directory


class WorkdirBusy(Exception):
    """Another agent holds this work directory."""


def lock_workdir(workdir: Path) -> IO[str]:
    """An exclusive lock on WORKDIR/agent.lock, held while the returned file stays open.

    The work directory and its activities/ are the agent's, mode 0711: execution users pass
    through them to their activity's own directory (0700, theirs) but list and write nothing there.
    The lock file is the agent's alone (0600)."""
    workdir.mkdir(mode=0o711, parents=True, exist_ok=True)
    (workdir / ACTIVITIES).mkdir(mode=0o711, exist_ok=True)
    for d in (workdir, workdir / ACTIVITIES):
        os.chmod(d, 0o711)
    try:
        fd = os.open(workdir / "agent.lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:  # a link planted there (O_NOFOLLOW), a read-only file system
        raise ground.GroundProblem(f"cannot open {workdir / 'agent.lock'}: {e.strerror}") from None
    os.fchmod(fd, 0o600)  # one an older agent left keeps its mode otherwise
    f = os.fdopen(fd, "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise WorkdirBusy(f"{workdir} is in use by another agent") from None
    return f


async def serve(config: AgentConfig) -> None:
    """Run the configured agents until cancelled, or until SIGTERM / SIGINT."""
    resources: HostResources = gather_resources(config.cores, config.memory, config.gpus, config.custom,
                                                config.pin_cores)
    if resources.gpus:
        log.info("GPUs: %s", ", ".join(f"{g.index} {g.model or '?'} {g.pci_bus_id}".strip() for g in resources.gpus))
    with ExitStack() as stack:
        runners: list[Runner] = []
        dynamic: DynamicUsers | None = None  # one set of uids for every agent of this process
        for name in config.names():
            if config.light:
                runners.append(LightRunner())
            else:
                workdir = config.workdir_of(name)
                stack.enter_context(lock_workdir(workdir))
                if dynamic is None and config.policy.dynamic is not None and users.is_root():
                    dynamic = DynamicUsers(config.base_dir(), *config.policy.dynamic)
                runner = ProcessRunner(workdir, masters=config.masters, policy=config.policy,
                                       containment=config.containment, pids_limit=config.pids_limit,
                                       cpu_cap=config.cpu_cap, unkillable_timeout=config.unkillable_timeout,
                                       dynamic=dynamic, retention=config.retention,
                                       disk_per_slot=config.disk_per_slot, resources=resources,
                                       dev_dir=config.dev_dir, path=config.path)
                stack.callback(runner.close)  # its cgroup subtree goes if nothing runs in it
                runners.append(runner)
                ground.check(workdir / ACTIVITIES, config.policy)  # GroundProblem stops the agent
        if not config.light and not users.is_root():
            log.info("not root: every activity runs as %s (no dynamic users)", users.agent_identity().name)
        facts = gather(config.slots, config.memory, config.attributes, resources.as_json())
        async with AsyncExitStack() as clients:
            agents: list[Agent] = []
            for name, runner in zip(config.names(), runners):
                # A client (connection pool) per agent: httpcore looks at every connection of a pool
                # on each request, so one pool for N agents costs N times more per heartbeat.
                client = await clients.enter_async_context(httpx.AsyncClient(limits=_LIMITS))
                agents.append(Agent(name, facts, runner, MasterLink(config.masters, config.token, client),
                                    heartbeat=config.heartbeat, watch=not config.light))
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, lambda: [a.stop() for a in agents])
            try:
                await asyncio.gather(*(a.run() for a in agents))
            finally:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
    log.info("agent stopped%s", "" if config.light else "; its activities keep running (the state file has them)")


def run(config: AgentConfig) -> None:
    asyncio.run(serve(config))
