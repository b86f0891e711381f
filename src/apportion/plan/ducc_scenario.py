"""DUCC scenario files: a DUCC configuration, hosts with memory, a clock and a timeline of jobs.

A scenario whose top level has a ``ducc:`` key is a DUCC scenario (docs/plan-format.md,
"DUCC scenarios")::

    ducc: {classes: ducc.classes, nodes: cluster.nodes, users: ducc.users,
           properties: {ducc.rm.share.quantum: 15}}
    hosts: [{name: "m[1-4]", memory: 64}]
    cycle: 10                # seconds between scheduling cycles
    report: steps            # or cycles
    timeline:
      - at: 0
        jobs: [{id: j1, user: ann, class: normal, memory: 30, work_items: 400, ...}]
      - at: 60
        cancel: [j1]
        nodes: {vary_off: [m2]}

Like plan files, it is read with every key's line kept, shaped by strict pydantic
models, then checked for meaning; every problem is reported together, as
``file:line: field: reason``. The DUCC configuration files are read by the DUCC
importer (``load_ducc``), whose problems carry their own files and lines. The
result is a frozen ``DuccScenario`` (``apportion.scenario.ducc_model``).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from apportion.engine.ducc.config import DuccConfig, Policy
from apportion.importers.ducc.values import suggest
from apportion.plan.errors import KeyPath, PlanError, Positions, Problem, Reporter
from apportion.plan.hostnames import expand_hosts
from apportion.plan.hosts import new_host_names
from apportion.plan.positions import Document, compile_document, load_document
from apportion.plan.schema import Checked, QuotaIn, RequestId, kind_of, show, user_name_problem, validate_item
from apportion.scenario.ducc_model import (
    DEFAULT_HORIZON,
    DEFAULT_THREADS,
    NODE_EVENTS,
    DuccScenario,
    DuccStep,
    JobSpec,
    NodeEvents,
)

NonNegNumber = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PosNumber = Annotated[float, Field(gt=0, allow_inf_nan=False)]
PosInt = Annotated[int, Field(ge=1)]
Name = Annotated[str, Field(min_length=1)]

RESOLVED_KEYS = ("nodepools", "classes", "users", "properties", "domain")  # `apportion import ducc` output
JOB_ONLY_FIELDS = ("max_processes", "threads", "work_items", "init_seconds", "seconds_per_item")
_OPPOSITE = {"alive": "dead", "vary_on": "vary_off", "available": "unavailable"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class DuccFilesIn(_Model):
    """``ducc:``: DUCC's own files, relative to the scenario; every one optional."""

    directory: str | None = None
    classes: str | None = None
    nodes: str | list[str] | None = None
    users: str | None = None
    properties: dict[str, Any] = {}


class DuccHostIn(_Model):
    name: Name
    memory: NonNegNumber | None = None


class DuccJobIn(_Model):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=False)

    id: RequestId
    user: Name
    cls: Name | None = Field(None, alias="class")
    memory: PosNumber
    max_processes: PosInt | None = None
    threads: PosInt = DEFAULT_THREADS
    work_items: PosInt | None = None
    init_seconds: NonNegNumber = 0.0
    seconds_per_item: PosNumber = 1.0
    reserve: bool = False


class NodeEventsIn(_Model):
    dead: list[str] = []
    alive: list[str] = []
    vary_off: list[str] = []
    vary_on: list[str] = []
    unavailable: list[str] = []
    available: list[str] = []


class DuccStepIn(_Model):
    at: NonNegNumber | None = None
    jobs: list[Any] = []
    cancel: list[RequestId] = []
    nodes: NodeEventsIn = NodeEventsIn()
    ducc: Any = None


class ReplayIn(_Model):
    """``replay:``: a DUCC system-test workload directory (jobs.in/ and jobs.prepare)."""

    workload: str
    compression: PosNumber | None = None
    rewrite: bool | None = None
    seed: int | None = None
    init_seconds: NonNegNumber = 5.0
    cls: Name | None = Field(None, alias="class")  # for jobs whose class the configuration lacks
    snapshots: bool = False  # a snapshot at every submission (report: steps)


class DuccScenarioIn(_Model):
    ducc: Any = None
    hosts: list[Any] = []
    cycle: PosNumber | None = None
    report: Literal["steps", "cycles"] = "steps"
    until: NonNegNumber | None = None
    horizon: PosNumber | None = None
    replay: Any = None
    timeline: Any = None


EGO_SECTIONS = ("resource_groups", "consumers", "policy")


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> dict[str, Any]:
    """The fields of the model found at ``loc`` inside ``model`` (nested models only)."""
    for part in loc:
        field = model.model_fields.get(str(part))
        sub = getattr(field, "annotation", None) if field is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return {}
        model = sub
    return dict(model.model_fields)


def is_ducc_scenario(data: Any) -> bool:
    """True for a parsed file that is a DUCC scenario: it has a ``ducc:`` key and no EGO
    plan sections (a file with both is an EGO plan carrying a DUCC section)."""
    return isinstance(data, Mapping) and "ducc" in data and not any(k in data for k in EGO_SECTIONS)


_DUCC_USER = re.compile(r"[A-Za-z0-9_.@:+-]{1,200}\Z")  # as the API takes a job's user


def ducc_accounts(raw: Any) -> tuple[dict[str, str], list[tuple[KeyPath, str]]]:
    """``ducc.accounts``: DUCC user (or ``"*"``, every other user) -> the OS account its
    processes run as, and the problems found, each (path below ``accounts``, reason). Only
    a live master uses it; a scenario may carry it, checked the same."""
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, [((), f"must be a mapping of DUCC user names (or \"*\") to OS user names (got {kind_of(raw)})")]
    out: dict[str, str] = {}
    problems: list[tuple[KeyPath, str]] = []
    for user, account in raw.items():
        if not isinstance(user, str) or not (user == "*" or _DUCC_USER.match(user)):
            problems.append(((str(user),), "a key is a DUCC user name (letters, digits, _.@:+-) or \"*\" for "
                             "every other user"))
            continue
        problem = user_name_problem(account)
        if problem is not None:
            problems.append(((user,), problem))
            continue
        out[user] = account
    return out, problems



class _Compiler:
    def __init__(self, source: str, positions: Positions | None, base: Path, require_memory: bool = True) -> None:
        self.require_memory = require_memory
        self.reporter = Reporter(source, positions)
        self.source = source
        self.positions = positions
        self.base = base
        self.memory: dict[str, float] = {}
        self.host_names: list[str] = []
        self.hosts_complete = True
        self.later: list[Problem] = []  # problems from DUCC's own files
        self.failed = False  # a problem was found that is not in the reporter
        self.seq = 0
        self.jobs: dict[str, str] = {}  # id -> where submitted
        self.cancelled: dict[str, str] = {}

    def add(self, path: KeyPath, reason: str) -> None:
        self.reporter.add(path, reason)

    def checked(self, model: type, raw: Any, prefix: KeyPath) -> Checked[Any]:
        item = validate_item(model, raw)
        for loc, reason in item.errors:
            if loc[-1:] == ("[key]",):
                loc, reason = loc[:-1], f"a key {reason}"
            if reason == "unknown field" and loc:  # suggest this model's own fields
                known = [f.alias or name for name, f in _fields_at(model, loc[:-1]).items()]
                close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
                reason += f"; did you mean {close[0]!r}?" if close else ""
            self.add(prefix + loc, reason)
        return item

    # --- hosts and configuration -------------------------------------------------

    def hosts(self, items: list[Any]) -> None:
        first: dict[str, int] = {}
        for i, raw in enumerate(items):
            item = self.checked(DuccHostIn, raw, ("hosts", i))
            names = new_host_names(item.value("name"), i, first,
                                   lambda reason, i=i: self.add(("hosts", i, "name"), reason))
            if names is None:
                self.hosts_complete = False
                continue
            for n in names:
                self.host_names.append(n)
                if item.model is not None and item.model.memory is not None:
                    self.memory[n] = item.model.memory

    def _file(self, value: str, at: KeyPath, directory: bool = False) -> Path | None:
        path = self.base / value
        if directory and not path.is_dir():
            self.add(at, f"{value}: no such directory (looked in {self.base})")
            return None
        if not directory and not path.is_file():
            self.add(at, f"{value}: no such file (looked in {self.base})")
            return None
        return path

    def quotas(self, raw: Any, at: KeyPath) -> None:
        """``ducc.quotas``: DUCC user -> the fields of a consumer's quota (``QuotaIn``)."""
        if not isinstance(raw, Mapping):
            self.add(at, f"must be a mapping of DUCC user names to quotas (got {kind_of(raw)})")
            return
        for user, fields in raw.items():
            if isinstance(user, str) and _DUCC_USER.match(user):
                self.checked(QuotaIn, fields, at + (user,))
            else:
                self.add(at + (str(user),), "a key is a DUCC user name (letters, digits, _.@:+-)")

    def config(self, raw: Any, at: KeyPath) -> DuccConfig | None:
        """The ``ducc:`` section at ``at``: DUCC's files, or the resolved form `apportion import ducc` writes."""
        from apportion.importers.ducc import ducc_config_from_mapping, load_ducc

        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            self.add(at, f"must be a mapping (classes, nodes, users, properties; got {kind_of(raw)})")
            return None
        if "accounts" in raw:  # who runs as whom on a live master (service/ducc/plan.py)
            for loc, reason in ducc_accounts(raw["accounts"])[1]:
                self.add(at + ("accounts", *loc), reason)
            raw = {k: v for k, v in raw.items() if k != "accounts"}
        if "quotas" in raw:  # per-user limits on a live master (service/quotas.py)
            self.quotas(raw["quotas"], at + ("quotas",))
            raw = {k: v for k, v in raw.items() if k != "quotas"}
        if "nodepools" in raw:
            hosts: dict[str, Any] = {n: self.memory.get(n) for n in self.host_names}
            try:
                cfg = ducc_config_from_mapping(raw, hosts, source=self.source, positions=self.positions, path=at)
            except PlanError as e:
                self.later.extend(e.problems)
                return None
            return self._memory_known(cfg, at)
        item = self.checked(DuccFilesIn, dict(raw), at)
        m = item.model
        if m is None or item.tainted:
            return None
        ok = True
        directory = classes = users = None
        nodes: list[Path] | None = None
        if m.directory is not None:
            directory = self._file(m.directory, at + ("directory",), directory=True)
            ok &= directory is not None
        if m.classes is not None:
            classes = self._file(m.classes, at + ("classes",))
            ok &= classes is not None
        if m.users is not None:
            users = self._file(m.users, at + ("users",))
            ok &= users is not None
        if m.nodes is not None:
            listed = [m.nodes] if isinstance(m.nodes, str) else m.nodes
            single = isinstance(m.nodes, str)
            nodes = []
            for j, name in enumerate(listed):
                p = self._file(name, at + (("nodes",) if single else ("nodes", j)))
                ok &= p is not None
                if p is not None:
                    nodes.append(p)
        if not ok:
            return None
        def load(properties: dict[str, Any]) -> DuccConfig:
            return load_ducc(directory, classes=classes, users=users, nodes=nodes,
                             properties=properties, memory=self.memory, properties_source=self.source,
                             properties_positions=self.positions, properties_path=at + ("properties",),
                             memory_source=self.source)

        try:
            cfg = load(m.properties)
        except PlanError as e:
            self.later.extend(e.problems)
            if m.properties and not any(p.file != self.source for p in e.problems):
                # only the properties are wrong: check the rest of the scenario against the files
                # (the scenario still fails, with every problem)
                self.failed = True
                try:
                    return self._memory_known(load({}), at)
                except PlanError:
                    return None
            return None
        return self._memory_known(cfg, at)

    def _memory_known(self, cfg: DuccConfig, at: KeyPath) -> DuccConfig | None:
        unknown = [h for h, mem in cfg.hosts.items() if mem is None]
        if unknown and self.require_memory:
            shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            self.add(("hosts",) if self.host_names else at,
                     f"no memory size for {len(unknown)} host(s) of the DUCC configuration ({shown}); "
                     "give it in hosts: [{name: ..., memory: GB}]")
            return None
        return cfg

    # --- jobs ------------------------------------------------------------------

    def job(self, raw: Any, where: KeyPath, at: float, cfg: DuccConfig | None) -> JobSpec | None:
        item = self.checked(DuccJobIn, raw, where)
        m = item.model
        raw_id = item.value("id")
        job_id = str(raw_id) if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
        label = f"{where[0]}[{where[1]}].jobs[{where[3]}]" if len(where) >= 4 else str(where)
        if job_id:
            if job_id in self.jobs:
                self.add(where + ("id",), f"job id {job_id} already used at {self.jobs[job_id]}")
                job_id = None
            else:
                self.jobs[job_id] = label
        self.seq += 1
        if m is None:
            return None
        if m.reserve:
            wrong = [f for f in JOB_ONLY_FIELDS if f in m.model_fields_set]
            for f in wrong:
                self.add(where + (f,), "does not apply to a reservation (reserve: true): it holds its "
                         "space until it is cancelled")
            if wrong:
                return None
        cls_name = self.job_class(m.cls, m.reserve, where, cfg)
        if cls_name is None or item.tainted or job_id is None:
            return None
        return JobSpec(id=job_id, user=m.user, cls=cls_name, memory=float(m.memory),
                       max_processes=m.max_processes, threads=m.threads, work_items=m.work_items,
                       init_seconds=float(m.init_seconds), seconds_per_item=float(m.seconds_per_item),
                       reserve=m.reserve, submitted=at, seq=self.seq)

    def job_class(self, name: str | None, reserve: bool, where: KeyPath, cfg: DuccConfig | None) -> str | None:
        if cfg is None:
            return None
        if name is None:
            default = cfg.default_class(Policy.RESERVE if reserve else Policy.FAIR_SHARE)
            if default is None:
                self.add(where, f"no class given, and the DUCC configuration has no default "
                         f"{'RESERVE' if reserve else 'FAIR_SHARE'} class")
                return None
            name = default.name
        at = where + ("class",)
        cls = cfg.classes.get(name)
        if cls is None:
            self.add(at, f"class {name} is not defined in the DUCC configuration"
                     + suggest(name, [c.name for c in cfg.schedulable_classes()]))
            return None
        if cls.abstract:
            self.add(at, f"class {name} is abstract (a template); submit to a class derived from it")
            return None
        if reserve and cls.policy is Policy.FAIR_SHARE:
            self.add(at, f"class {name} is FAIR_SHARE (preemptable); a reservation needs a RESERVE or "
                     "FIXED_SHARE class")
            return None
        if not reserve and cls.policy is Policy.RESERVE:
            self.add(at, f"class {name} is a RESERVE class: it takes reservations (reserve: true), not jobs")
            return None
        # a class's `users` is not checked here: a job from anyone else is submitted and
        # refused by the scheduler (state deferred, the reason naming the class and user)
        return name

    # --- steps -----------------------------------------------------------------

    def node_events(self, m: NodeEventsIn, index: int, cfg: DuccConfig | None) -> NodeEvents:
        seen: dict[tuple[str, str], str] = {}
        out: dict[str, tuple[str, ...]] = {}
        for event in NODE_EVENTS:
            names: list[str] = []
            for j, pattern in enumerate(getattr(m, event)):
                where: KeyPath = ("timeline", index, "nodes", event, j)
                try:
                    expanded = expand_hosts(pattern)
                except ValueError as exc:
                    self.add(where, str(exc))
                    continue
                if cfg is not None:
                    unknown = [n for n in expanded if n not in cfg.hosts]
                    if unknown:
                        if self.hosts_complete:  # else the unreadable host entry may be the one named
                            self.add(where, f"unknown host {', '.join(unknown[:5])}: not a node of the DUCC "
                                     "configuration")
                        continue
                for n in expanded:
                    key = (n, _OPPOSITE.get(event, event))  # an event and its opposite conflict
                    if key in seen:
                        other = "listed twice" if seen[key] == event else f"also in nodes.{seen[key]} of this step"
                        self.add(where, f"host {n} is {other}")
                        continue
                    seen[key] = event
                    names.append(n)
            out[event] = tuple(names)
        return NodeEvents(**out)

    def timeline(self, raw_steps: list[Any], cfg: DuccConfig | None) -> list[DuccStep]:
        steps: list[DuccStep] = []
        previous: float | None = None
        for index, raw in enumerate(raw_steps):
            where: KeyPath = ("timeline", index)
            item = self.checked(DuccStepIn, raw, where)
            m = item.model
            if m is None:
                continue
            if m.at is None:
                if not any(loc[:1] == ("at",) for loc, _ in item.errors):
                    self.add(where + ("at",), "is required")
            elif previous is not None and m.at < previous:
                self.add(where + ("at",), f"at {m.at:g} is before the previous step's at {previous:g}; "
                         "steps go in time order")
            if m.at is not None:
                previous = m.at if previous is None else max(previous, m.at)
            at = float(m.at or 0.0)
            new_cfg = None
            if m.ducc is not None:
                new_cfg = self.config(m.ducc, where + ("ducc",))
                if new_cfg is not None:
                    cfg = new_cfg
            jobs = [self.job(j, where + ("jobs", k), at, cfg) for k, j in enumerate(m.jobs)]
            for k, job_id in enumerate(m.cancel):
                if job_id not in self.jobs:
                    self.add(where + ("cancel", k), f"cannot cancel {job_id}: it is not submitted in this or "
                             "an earlier step")
                elif job_id in self.cancelled:
                    self.add(where + ("cancel", k), f"cannot cancel {job_id}: already cancelled at "
                             f"{self.cancelled[job_id]}")
                else:
                    self.cancelled[job_id] = f"timeline[{index}]"
            steps.append(DuccStep(at=at, jobs=tuple(j for j in jobs if j is not None), cancel=tuple(m.cancel),
                                  nodes=self.node_events(m.nodes, index, cfg), config=new_cfg,
                                  label=f"timeline[{index}]"))
        return steps

    def replay(self, raw: Any, cfg: DuccConfig | None) -> list[DuccStep]:
        from apportion.importers.ducc.workload import read_workload

        item = self.checked(ReplayIn, raw, ("replay",))
        m = item.model
        if m is None or item.tainted:
            return []
        directory = self._file(m.workload, ("replay", "workload"), directory=True)
        if directory is None or cfg is None:
            return []
        try:
            wl = read_workload(directory, compression=m.compression, rewrite=m.rewrite, seed=m.seed)
        except PlanError as e:
            self.later.extend(e.problems)
            return []
        fallback = m.cls
        if fallback is not None and self.job_class(fallback, False, ("replay",), cfg) is None:
            return []
        if fallback is None:
            default = cfg.default_class(Policy.FAIR_SHARE)
            fallback = default.name if default is not None else None
        by_time: dict[float, list[JobSpec]] = {}
        for tj in wl.jobs:
            cls = tj.cls if tj.cls in cfg.classes and not cfg.classes[tj.cls].abstract else fallback
            if cls is None:
                self.add(("replay", "workload"), f"{tj.file}: class {tj.cls} is not defined and the "
                         "configuration has no default FAIR_SHARE class; give replay.class")
                continue
            if tj.name in self.jobs:
                self.add(("replay", "workload"), f"{tj.file}: job id {tj.name} already used at {self.jobs[tj.name]}")
                continue
            self.jobs[tj.name] = f"replay {tj.file}"
            self.seq += 1
            by_time.setdefault(tj.submit_s, []).append(JobSpec(
                id=tj.name, user=tj.user, cls=cls, memory=float(tj.memory), max_processes=tj.max_processes,
                threads=tj.threads, work_items=tj.items, init_seconds=m.init_seconds,
                seconds_per_item=tj.seconds_per_item, submitted=tj.submit_s, seq=self.seq))
        return [DuccStep(at=t, jobs=tuple(jobs), label="replay " + ", ".join(j.id for j in jobs),
                         report=m.snapshots)
                for t, jobs in sorted(by_time.items())]


def _merge(timeline: list[DuccStep], replay: list[DuccStep]) -> tuple[DuccStep, ...]:
    """Timeline and replay steps in time order; at equal times the timeline's step comes first."""
    tagged = [(s.at, 0, i, s) for i, s in enumerate(timeline)] + [(s.at, 1, i, s) for i, s in enumerate(replay)]
    return tuple(s for *_, s in sorted(tagged, key=lambda x: x[:3]))


def compile_ducc_scenario(data: Any, source: str = "<scenario>", positions: Positions | None = None,
                          base: str | os.PathLike[str] | None = None,
                          early: list[Problem] | None = None, require_memory: bool = True) -> DuccScenario:
    """Compile a parsed DUCC scenario mapping; ``PlanError`` lists every problem.

    Files the scenario names are read relative to ``base`` (default: the
    directory of ``source``). ``require_memory=False`` (the live master): hosts of
    the configuration with no memory size are kept, their agents report it.
    """
    comp = _Compiler(source, positions, Path(base) if base is not None else Path(source).parent, require_memory)
    if not isinstance(data, Mapping):
        comp.add((), f"must be a mapping with ducc, hosts and timeline (got {kind_of(data)})")
        raise PlanError([*(early or []), *comp.reporter.problems])
    top = comp.checked(DuccScenarioIn, dict(data), ())
    m = top.model
    assert m is not None  # every field has a default
    shape = list(comp.reporter.problems)
    comp.reporter.problems = []
    if m.report == "cycles" and m.cycle is None and "report" in m.model_fields_set:
        comp.add(("report",), "report: cycles needs a clock: set cycle (seconds between cycles)")
    if m.horizon is not None and m.cycle is None:
        comp.add(("horizon",), "horizon needs a clock: set cycle (seconds between cycles); without one each "
                 "step is settled and the run ends after the last")
    if m.horizon is not None and m.until is not None:
        comp.add(("horizon",), f"give until or horizon, not both: until ({m.until:g}s) already ends the run")
    comp.hosts(m.hosts)
    cfg = comp.config(m.ducc, ("ducc",))
    raw_steps = m.timeline
    if raw_steps is None:
        raw_steps = []
    elif not isinstance(raw_steps, list):
        comp.add(("timeline",), f"must be a list of steps (got {show(raw_steps)})")
        raw_steps = []
    steps = comp.timeline(raw_steps, cfg)
    replay = comp.replay(m.replay, cfg) if m.replay is not None else []
    merged = _merge(steps, replay)
    horizon = m.horizon if m.horizon is not None else DEFAULT_HORIZON
    if m.cycle is not None and m.until is None and merged and merged[-1].at > horizon:
        default = "" if m.horizon is not None else ", the default"
        comp.add(("horizon",), f"{merged[-1].label or 'the last step'} comes at {merged[-1].at:g}s, after the "
                 f"run's horizon ({horizon:g}s{default}): set horizon (or until) to a later time")
    here = [*comp.reporter.problems, *(p for p in comp.later if p.file == source)]
    problems = [*(early or []), *shape, *sorted(here, key=lambda p: (p.line is None, p.line or 0)),
                *(p for p in comp.later if p.file != source)]
    if problems or cfg is None or comp.failed:
        raise PlanError(problems or [Problem(source, None, "ducc", "the DUCC configuration could not be read")])
    return DuccScenario(config=cfg, steps=merged, cycle=m.cycle, report=m.report, until=m.until,
                        source=source, horizon=horizon)


def ducc_scenario_of(document: Document) -> DuccScenario:
    """The DUCC scenario a parsed file holds; ``PlanError`` lists every problem with its line."""
    return compile_document(document, lambda d: compile_ducc_scenario(d.data, d.source, d.positions,
                                                                      early=d.problems))


def load_ducc_scenario(path: str | os.PathLike[str]) -> DuccScenario:
    """Read a DUCC scenario file (.yaml/.yml/.toml); ``PlanError`` lists every problem with its line."""
    return ducc_scenario_of(load_document(path))


def ducc_scenario_from_directory(directory: str | os.PathLike[str], jobs: str | os.PathLike[str] | None = None,
                                 properties: Mapping[str, Any] | None = None) -> DuccScenario:
    """``apportion solve DIR``: a DUCC configuration directory plus a jobs file.

    ``jobs`` is a DUCC scenario file without a ``ducc:`` key (hosts, cycle, report,
    until, replay, timeline), or a DUCC system-test workload directory (``jobs.in/``),
    replayed with a 10 s cycle. Default: ``DIR/jobs.yaml``, and without it no timeline
    (the configuration is still checked). ``properties`` override the ``ducc.rm.*``
    properties found in the directory.
    """
    base = Path(directory)
    if not base.is_dir():
        raise PlanError([Problem(str(base), None, "directory", "no such directory")])
    jobs_path = Path(jobs) if jobs is not None else base / "jobs.yaml"
    ducc = {"directory": str(base.resolve()), "properties": dict(properties or {})}
    if jobs_path.is_dir():
        data = {"ducc": ducc, "cycle": 10, "replay": {"workload": str(jobs_path.resolve())}}
        return compile_ducc_scenario(data, str(jobs_path), None, base=Path.cwd())
    if not jobs_path.is_file():
        if jobs is None:  # the configuration alone: a scenario without a timeline
            return compile_ducc_scenario({"ducc": ducc}, str(base), None, base=Path.cwd())
        raise PlanError([Problem(str(jobs_path), None, "jobs", "no such file or directory: give a DUCC scenario "
                                 "without ducc: (hosts, cycle, timeline) or a DUCC workload directory (jobs.in/)")])
    doc = load_document(jobs_path)
    if isinstance(doc.data, Mapping) and "ducc" in doc.data:
        raise PlanError([Problem(doc.source, doc.with_positions().positions.get(("ducc",)), "ducc",
                                 "the configuration comes from the directory; leave ducc: out of the jobs file")])

    def compile_(d: Document) -> DuccScenario:
        data = dict(d.data) if isinstance(d.data, Mapping) else d.data
        if isinstance(data, dict):
            data["ducc"] = ducc
        return compile_ducc_scenario(data, d.source, d.positions, early=d.problems)

    return compile_document(doc, compile_)
