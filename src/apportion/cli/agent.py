"""`apportion agent`: report this host to the master and run the processes it asks for."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from apportion.agent.users import UserPolicy


def _token(token_file: Path | None) -> str:
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as e:
            raise typer.BadParameter(f"cannot read it: {e.strerror}", param_hint="--token-file") from None
        if not token:
            raise typer.BadParameter("the file is empty", param_hint="--token-file")
        return token
    token = os.environ.get("APPORTION_TOKEN", "").strip()
    if not token:
        raise typer.BadParameter("no token: pass --token-file FILE or set APPORTION_TOKEN",
                                 param_hint="--token-file")
    return token


def _policy(default_user: str, min_uid: int, banned: str, allowed: str, dynamic_users: str) -> UserPolicy:
    """The user policy the flags give; a bad name or a banned default user is refused, naming the flag."""
    from apportion.agent.dynamic import parse_range
    from apportion.agent.users import UserPolicy, parse_names

    try:
        banned_users = parse_names(banned, "--banned-users")
        allowed_users = parse_names(allowed, "--allowed-system-users")
        defaults = parse_names(default_user, "--default-user")
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    try:
        dynamic = parse_range(dynamic_users)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--dynamic-users") from None
    if dynamic is not None and dynamic[0] < min_uid:
        raise typer.BadParameter(f"{dynamic[0]}-{dynamic[1]} starts below --min-uid {min_uid}",
                                 param_hint="--dynamic-users")
    if len(defaults) != 1 or "," in default_user:
        raise typer.BadParameter("one user name", param_hint="--default-user")
    (default,) = defaults
    if default in banned_users:
        raise typer.BadParameter(f"{default} is one of --banned-users", param_hint="--default-user")
    return UserPolicy(default_user=default, min_uid=min_uid, banned_users=banned_users,
                      allowed_system_users=allowed_users, dynamic=dynamic)


def agent_command(
    master: str = typer.Option(..., "--master", help="The master's URL, or several separated by commas "
                               "(tried in order; a standby's answer leads to the leader)."),
    name: str = typer.Option(..., "--name", help="This host's name, as the master and plans know it."),
    token_file: Path | None = typer.Option(None, "--token-file", help="A file holding an agent token for "
                                           "this host (or an admin token); default: $APPORTION_TOKEN."),
    slots: int | None = typer.Option(None, "--slots", min=0, help="Slots to offer (default: logical CPUs)."),
    memory: float | None = typer.Option(None, "--memory", min=0, help="Memory in GB (default: the host's)."),
    attribute: list[str] = typer.Option([], "--attribute", "-a", metavar="KEY=VALUE",
                                        help="A host attribute for select(); repeatable. Numbers and "
                                        "true/false are read as such."),
    workdir: Path | None = typer.Option(None, "--workdir", help="Where the state file and activities' "
                                        "output go (default: ./apportion-agent/NAME). One per agent."),
    heartbeat: float | None = typer.Option(None, "--heartbeat", min=0.05, help="Seconds between heartbeats "
                                           "(default: what the master says, 1 s)."),
    light: bool = typer.Option(False, "--light", help="Start no processes: a start is reported running, "
                               "a stop killed (for benchmarks)."),
    count: int = typer.Option(1, "--count", min=1, help="Run N agents in this process, named NAME-0 .. "
                              "NAME-(N-1), each with its own heartbeat loop (with --light, for benchmarks)."),
    default_user: str = typer.Option("nobody", "--default-user", help="Run as root: the user an activity "
                                     "runs as when the master names none and --dynamic-users is off."),
    dynamic_users: str = typer.Option("61184-65519", "--dynamic-users", metavar="LO-HI|off", help="Run as root: "
                                      "an activity whose plan names no execution user runs under a uid of its "
                                      "consumer's own from this range (stable per consumer, no passwd entry, HOME "
                                      "in its directory; systemd's DynamicUser range by default). off: they all "
                                      "run as --default-user, sharing that account."),
    min_uid: int = typer.Option(1000, "--min-uid", min=0, help="Run as root: refuse execution users with a "
                                "smaller uid, unless --allowed-system-users names them (uid 0 is always refused)."),
    banned_users: str = typer.Option("root", "--banned-users", metavar="NAME,...", help="Users never run as, "
                                     "whatever else allows them."),
    allowed_system_users: str = typer.Option("nobody", "--allowed-system-users", metavar="NAME,...",
                                             help="Users below --min-uid that may run work."),
    containment: str = typer.Option("auto", "--containment", metavar="LEVEL", help="How activities' processes "
                                    "are held: auto (cgroup-v2 where memory and pids are delegated, else "
                                    "cgroup-v1 where a memory hierarchy is writable, else process-group), or "
                                    "one of those three; a level named that cannot work stops the agent."),
    pids_limit: int = typer.Option(4096, "--pids-limit", min=0, help="Processes an activity may have at once "
                                   "(cgroup levels; 0: no limit)."),
    cpu_cap: float | None = typer.Option(None, "--cpu-cap", min=0.01, help="A hard cap on the CPU an activity "
                                         "may use, in cores per slot (default: none, CPU weight by slots only)."),
    unkillable_timeout: float = typer.Option(60.0, "--unkillable-timeout", min=0.01, help="Seconds processes "
                                             "may outlive SIGKILL before the activity is reported unkillable "
                                             "(the master then closes the host)."),
    activity_retention: float = typer.Option(600.0, "--activity-retention", min=0, metavar="SECONDS",
                                             help="How long an activity's directory, and what its processes "
                                             "left there, stays after it ended and the master has its output "
                                             "(0: removed at once)."),
    disk_per_slot: float | None = typer.Option(None, "--disk-per-slot", min=0.001, metavar="GB", help="Disk an "
                                               "activity's directory may take, per slot (GB of 2^30 bytes); past "
                                               "it the activity is killed, with the reason (default: no limit)."),
    cores: int | None = typer.Option(None, "--cores", min=0, max=4096, help="Cores to report in the host's "
                                     "resources (default: the CPUs this agent may use)."),
    gpus: str | None = typer.Option(None, "--gpus", metavar="N|I,J,...", help="The host's GPUs: a count or "
                                    "device indices (default: what NVML finds, with the gpu extra and a driver; "
                                    "else none). 0: none."),
    resource: list[str] = typer.Option([], "--resource", metavar="NAME=N", help="A countable custom resource "
                                       "of the host, reported with its cores, memory and GPUs; repeatable."),
    pin_cores: bool = typer.Option(False, "--pin-cores", help="Give each activity its own cores: a cpuset "
                                   "(cgroup v1) or, elsewhere, its CPU affinity; the master names them."),
    dev_dir: Path = typer.Option(Path("/dev"), "--dev-dir", help="Where the GPUs' device nodes (nvidia0, ...) "
                                 "are, for the devices cgroup."),
    path: str | None = typer.Option(None, "--path", help="The PATH activities get unless they declare one "
                                    "(default /usr/local/bin:/usr/bin:/bin): a bare command name (python3, sh) "
                                    "is looked up there, as the execution user."),
    log_level: str = typer.Option("INFO", "--log-level", help="DEBUG, INFO, WARNING or ERROR."),
) -> None:
    """Run an agent: register this host with the master, heartbeat, and start and stop its activities.

    Run as root, the agent starts each activity as its execution user (or, where the plan names none,
    a uid of its consumer's own from --dynamic-users), never as root, and refuses users its policy
    bans; run as another user, it runs every activity as itself."""
    from apportion.agent.facts import parse_attributes
    from apportion.agent.containment import CHOICES, ContainmentUnavailable
    from apportion.agent.ground import GroundProblem
    from apportion.agent.launch import AgentConfig, WorkdirBusy, run

    from apportion.agent.resources import parse_custom, parse_gpus, usable_cpus

    try:
        attributes = parse_attributes(attribute)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--attribute") from None
    try:
        stated_gpus = None if gpus is None else parse_gpus(gpus)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--gpus") from None
    try:
        custom = parse_custom(resource)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--resource") from None
    if pin_cores and cores is not None and cores > len(usable_cpus()):
        raise typer.BadParameter(f"{cores} cores to pin, and this agent may use {len(usable_cpus())} CPUs",
                                 param_hint="--cores")
    policy = _policy(default_user, min_uid, banned_users, allowed_system_users, dynamic_users)
    masters = [u.strip() for u in master.split(",") if u.strip()]
    if not masters:
        raise typer.BadParameter("no URL", param_hint="--master")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per heartbeat
    config = AgentConfig(masters=masters, name=name, token=_token(token_file), slots=slots, memory=memory,
                         attributes=attributes, workdir=workdir, heartbeat=heartbeat, light=light, count=count,
                         policy=policy, containment=containment, pids_limit=pids_limit or None,
                         cpu_cap=cpu_cap, unkillable_timeout=unkillable_timeout, retention=activity_retention,
                         disk_per_slot=None if disk_per_slot is None else int(disk_per_slot * 2**30),
                         cores=cores, gpus=stated_gpus, custom=custom, pin_cores=pin_cores, dev_dir=dev_dir,
                         **({"path": path} if path else {}))
    if containment not in CHOICES:
        raise typer.BadParameter(f"one of {', '.join(CHOICES)}", param_hint="--containment")
    try:
        run(config)
    except (WorkdirBusy, ContainmentUnavailable, GroundProblem) as e:
        typer.echo(f"apportion agent: {e}", err=True)
        raise typer.Exit(2) from None
