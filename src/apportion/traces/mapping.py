"""The mapping from a trace's users, groups, queues and partitions to consumer paths.

A mapping file (YAML, or JSON, or TOML with the same keys)::

    default: /Other                             # where a job no rule matches goes
    checkpoint: 3600                            # optional: seconds between checkpoints
    rules:                                      # first match wins; values are exact or glob patterns
      - {user: "12", consumer: /Teams/a}
      - {group: "3*", consumer: /Teams/b}
      - {queue: "2", partition: "*", consumer: /Batch, checkpoint: 600}

- ``default`` (a consumer path; absent: ``/Other``) takes every job no rule matches;
- a rule matches a job when every field it names matches: ``user``, ``group``,
  ``queue``, ``partition`` (the trace's values, as text: SWF's ``"12"``) and
  ``resource`` ("cpu" or "gpu"); a value with ``*``, ``?`` or ``[`` is a glob
  (``fnmatch``, case-sensitive), any other value must be equal; a number is taken as
  its text (``user: 12`` is ``user: "12"``); a rule must name at least one field;
- ``checkpoint`` (seconds > 0), at the top or in a rule, is the checkpoint interval for
  the jobs the rule (or the default) takes, when the trace gives none: a reclaimed job
  then loses only the work since its last checkpoint.

Every problem in the file is reported together, each as ``file:line: field: reason``
(``PlanError``), and nothing is used from a bad file.

``generate(trace, by="group")`` builds a mapping with one consumer per distinct value
and a plan skeleton with those consumers (share ratio 1 each) and the trace's hosts;
``render_map`` / ``render_plan`` write them as YAML.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from apportion.plan.consumers import path_problem
from apportion.plan.errors import PlanError, Problem, Reporter
from apportion.plan.positions import load_document
from apportion.traces.record import MATCH_FIELDS, RESOURCES, Machine, Trace, TraceInfo, TraceJob

DEFAULT_CONSUMER = "/Other"
RULE_FIELDS = MATCH_FIELDS + ("resource",)
_RULE_KEYS = RULE_FIELDS + ("consumer", "checkpoint")
_TOP_KEYS = ("default", "checkpoint", "rules")
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: ``match`` is field -> pattern (exact or glob); the job goes to ``consumer``."""

    match: tuple[tuple[str, str], ...]
    consumer: str
    checkpoint: float | None = None
    line: int | None = field(default=None, compare=False)

    def matches(self, values: dict[str, str]) -> bool:
        for name, pattern in self.match:
            value = values[name]
            if _GLOB.search(pattern):
                if not fnmatch.fnmatchcase(value, pattern):
                    return False
            elif value != pattern:
                return False
        return True


@dataclass
class Mapping:
    """Rules tried in order (first match wins) and a default.

    ``consumer_of(job)`` and ``checkpoint_of(job)`` are cached per distinct (user, group,
    queue, partition, resource), so a million jobs from a few hundred users cost a few
    hundred rule walks."""

    rules: tuple[Rule, ...] = ()
    default: str = DEFAULT_CONSUMER
    checkpoint: float | None = None
    source: str = field(default="", compare=False)
    _cache: dict[tuple[str, str, str, str, str], tuple[str, float | None]] = field(
        default_factory=dict, repr=False, compare=False)

    def resolve(self, job: TraceJob) -> tuple[str, float | None]:
        """(consumer path, checkpoint interval or None) for ``job``; the job's own
        checkpoint wins over the mapping's."""
        key = (job.user, job.group, job.queue, job.partition, job.resource)
        found = self._cache.get(key)
        if found is None:
            values = dict(zip(RULE_FIELDS, key, strict=True))
            found = (self.default, self.checkpoint)
            for rule in self.rules:
                if rule.matches(values):
                    found = (rule.consumer, rule.checkpoint if rule.checkpoint is not None else self.checkpoint)
                    break
            self._cache[key] = found
        if job.checkpoint is not None:
            return found[0], job.checkpoint
        return found

    def consumer_of(self, job: TraceJob) -> str:
        return self.resolve(job)[0]

    def checkpoint_of(self, job: TraceJob) -> float | None:
        return self.resolve(job)[1]

    def consumers(self) -> list[str]:
        """Every consumer path the mapping can give, rules first, default last, each once."""
        out = dict.fromkeys([r.consumer for r in self.rules] + [self.default])
        return list(out)


def _checkpoint(value: Any, path: tuple, report: Reporter) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        report.add(path, f"must be a number of seconds above 0 (got {value!r})")
        return None
    return float(value)


def _consumer(value: Any, path: tuple, report: Reporter) -> str | None:
    if not isinstance(value, str):
        report.add(path, f"must be a consumer path like /Teams/a (got {value!r})")
        return None
    problem = path_problem(value)
    if problem:
        report.add(path, problem)
        return None
    return value


def mapping_from_data(data: Any, source: str, positions: dict | None = None) -> Mapping:
    """A Mapping from parsed data; PlanError listing every problem (with lines when
    ``positions`` has them)."""
    report = Reporter(source, positions)
    if not isinstance(data, dict):
        report.add((), "a mapping file is a mapping with default and rules")
        report.raise_if_any()
    for key in data:
        if key not in _TOP_KEYS:
            report.add((str(key),), f"unknown key; known: {', '.join(_TOP_KEYS)}")
    default = DEFAULT_CONSUMER
    if "default" in data:
        default = _consumer(data["default"], ("default",), report) or DEFAULT_CONSUMER
    checkpoint = _checkpoint(data.get("checkpoint"), ("checkpoint",), report)
    rules: list[Rule] = []
    raw_rules = data.get("rules", [])
    if raw_rules is None:
        raw_rules = []
    if not isinstance(raw_rules, list):
        report.add(("rules",), "must be a list of rules like {group: \"3*\", consumer: /Teams/b}")
        raw_rules = []
    for index, raw in enumerate(raw_rules):
        at = ("rules", index)
        if not isinstance(raw, dict):
            report.add(at, "a rule is a mapping like {user: \"12\", consumer: /Teams/a}")
            continue
        ok = True
        match: list[tuple[str, str]] = []
        for key, value in raw.items():
            if key not in _RULE_KEYS:
                report.add(at + (str(key),), f"unknown key; a rule has {', '.join(_RULE_KEYS)}")
                ok = False
            elif key in RULE_FIELDS:
                if isinstance(value, bool) or not isinstance(value, (str, int)):
                    report.add(at + (key,), f"must be text, exact or a glob pattern (got {value!r})")
                    ok = False
                    continue
                text = str(value)
                if key == "resource" and not _GLOB.search(text) and text not in RESOURCES:
                    report.add(at + (key,), f"{text!r} is not one of {', '.join(RESOURCES)}")
                    ok = False
                match.append((key, text))
        if "consumer" not in raw:
            report.add(at, "a rule needs a consumer")
            ok = False
        consumer = _consumer(raw["consumer"], at + ("consumer",), report) if "consumer" in raw else None
        if not match and ok:
            report.add(at, f"a rule must match at least one of {', '.join(RULE_FIELDS)}; "
                           "use default for every other job")
            ok = False
        rule_checkpoint = _checkpoint(raw.get("checkpoint"), at + ("checkpoint",), report)
        if ok and consumer is not None:
            line = positions.get(at) if positions else None
            rules.append(Rule(tuple(match), consumer, rule_checkpoint, line))
    report.raise_if_any()
    return Mapping(tuple(rules), default, checkpoint, source)


def load_mapping(path: str | os.PathLike[str]) -> Mapping:
    """Read and check a mapping file (.yaml, .yml or .toml); PlanError naming
    file:line: field: reason for every problem."""
    document = load_document(path).with_positions()
    if document.problems:
        raise PlanError(document.problems)
    if document.data is None:
        raise PlanError([Problem(document.source, None, "file", "empty: a mapping needs default and rules")])
    return mapping_from_data(document.data, document.source, document.positions)


# --- generating a mapping from a trace ----------------------------------------

BY_FIELDS = MATCH_FIELDS
_LETTER = {"user": "u", "group": "g", "queue": "q", "partition": "p"}
_NOT_NAME = re.compile(r"[^0-9A-Za-z_-]+")


def consumer_name(by: str, value: str, names: dict[str, str] | None = None) -> str:
    """A valid consumer name for a trace value: numbers get the field's letter
    (group 3 -> g3, user 12 -> u12); text (or the header's name for a numbered queue or
    partition) keeps its letters, digits, '_' and '-', other characters become '_'."""
    text = (names or {}).get(value) or value
    text = _NOT_NAME.sub("_", text).strip("_") or _LETTER[by]
    if not text[:1].isalpha():
        text = _LETTER[by] + text
    return text[:128]


def _escape(value: str) -> str:
    """An exact-match pattern for ``value`` (glob characters bracketed)."""
    return re.sub(r"([*?\[])", r"[\1]", value)


def _natural(text: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)


@dataclass
class Generated:
    """What ``generate`` found: the mapping, the plan skeleton, and jobs per value."""

    mapping: Mapping
    plan: dict[str, Any]
    by: str
    counts: dict[str, int]
    trace: TraceInfo


def generate(trace: Trace, by: str = "group", prefix: str = "/") -> tuple[Mapping, dict[str, Any]]:
    """One consumer per distinct value of ``by`` in ``trace`` (read through once): the
    mapping (exact rules, default ``PREFIX/Other`` for jobs without a value) and a plan
    skeleton (hosts and resource groups from the trace's info, those consumers with
    share ratio 1). ``prefix`` ("/" or a path like /Teams) is the parent of them all."""
    found = generate_detail(trace, by, prefix)
    return found.mapping, found.plan


def generate_detail(trace: Trace, by: str = "group", prefix: str = "/") -> Generated:
    if by not in BY_FIELDS:
        raise ValueError(f"--by must be one of {', '.join(BY_FIELDS)} (got {by!r})")
    base = prefix.rstrip("/")
    if base:
        problem = path_problem(base)
        if problem:
            raise ValueError(f"prefix: {problem}")
    counts: dict[str, int] = {}
    resources: set[str] = set()
    for job in trace.jobs():
        value = getattr(job, by)
        counts[value] = counts.get(value, 0) + 1
        resources.add(job.resource)
    names = trace.info.queues if by == "queue" else trace.info.partitions if by == "partition" else {}
    used: dict[str, int] = {"Other": 1}
    rules = []
    for value in sorted((v for v in counts if v), key=_natural):
        name = consumer_name(by, value, names)
        if name in used:
            used[name] += 1
            name = f"{name[:120]}-{used[name]}"
        used[name] = 1
        rules.append(Rule(((by, _escape(value)),), f"{base}/{name}"))
    default = f"{base}/Other"
    mapping = Mapping(tuple(rules), default, None, "")
    consumers = [r.consumer for r in rules]
    if counts.get("", 0) or not consumers:
        consumers.append(default)
    plan = plan_skeleton(trace.info, consumers, base, sorted(resources) or ["cpu"])
    return Generated(mapping, plan, by, counts, trace.info)


def _ranges(names: list[str]) -> list[str]:
    """Consecutive numbered names (n001, n002, n003) folded into range patterns (n[001-003])."""
    out: list[str] = []
    run: list[tuple[str, str, str]] = []  # (prefix, digits, suffix)

    def flush() -> None:
        if not run:
            return
        if len(run) == 1:
            out.append(run[0][0] + run[0][1] + run[0][2])
        else:
            out.append(f"{run[0][0]}[{run[0][1]}-{run[-1][1]}]{run[0][2]}")
        run.clear()

    for name in names:
        m = re.fullmatch(r"(.*?)(\d+)([^\d]*)", name)
        if m is None:
            flush()
            out.append(name)
            continue
        head, digits, tail = m.groups()
        if run:
            p, d, t = run[-1]
            padded = d[0] == "0" or digits[0] == "0" or run[0][1][0] == "0"
            if p == head and t == tail and int(d) + 1 == int(digits) and (len(d) == len(digits) or not padded):
                run.append((head, digits, tail))
                continue
            flush()
        run.append((head, digits, tail))
    flush()
    return out


def _machine_hosts(machines: tuple[Machine, ...]) -> tuple[list[dict], list[str], list[str]]:
    """Plan hosts for the trace's machines: one per machine with its CPU slots (left out when
    the trace does not say, as for DUCC's nodes) and memory, and a second host NAME-gpu
    with its GPU slots for machines with GPUs."""
    hosts: list[dict] = []
    cpu_patterns: list[str] = []
    gpu_patterns: list[str] = []

    def add(names: list[str], settings: dict, patterns: list[str]) -> None:
        for pattern in _ranges(names):
            hosts.append({"name": pattern, **settings})
            patterns.append(pattern)

    # consecutive machines of the same size share one range
    group: list[str] = []
    key: tuple | None = None
    for m in machines + (Machine("", -1),):
        k = (m.cpus, m.memory)
        if k != key and group:
            settings: dict[str, Any] = {"slots": key[0]} if key[0] else {}  # type: ignore[index]
            if key[1] is not None:  # type: ignore[index]
                settings["memory"] = key[1]  # type: ignore[index]
            add(group, settings, cpu_patterns)
            group = []
        key = k
        group.append(m.name)
    gpu_group: list[str] = []
    gkey: int | None = None
    for m in machines + (Machine("", 0, -1),):
        if m.gpus <= 0 or m.gpus != gkey:
            if gpu_group:
                add(gpu_group, {"slots": gkey, "attributes": {"gpu": True}}, gpu_patterns)
            gpu_group = []
        gkey = m.gpus
        if m.gpus > 0:
            gpu_group.append(f"{m.name}-gpu")
    return hosts, cpu_patterns, gpu_patterns


def plan_skeleton(info: TraceInfo, consumers: Iterable[str], base: str = "",
                  resources: Iterable[str] = ("cpu",)) -> dict[str, Any]:
    """A plan fragment for a trace: its hosts (from the machines it lists, else its
    host and processor counts), resource groups named after ``TraceJob.resource``
    ("cpu", and "gpu" when the trace has GPU jobs), and ``consumers`` with share ratio 1
    (their parent ``base`` first, when given)."""
    hosts: list[dict] = []
    groups: list[dict] = []
    if info.machines:
        hosts, cpu, gpu = _machine_hosts(info.machines)
        if cpu:
            groups.append({"name": "cpu", "hosts": cpu})
        if gpu and "gpu" in resources:
            groups.append({"name": "gpu", "hosts": gpu})
        if "gpu" not in resources:
            hosts = [h for h in hosts if "attributes" not in h]
    elif info.hosts and info.processors:
        per, extra = divmod(info.processors, info.hosts)
        width = len(str(info.hosts))
        if extra:
            hosts.append({"name": f"n[{1:0{width}d}-{extra:0{width}d}]" if extra > 1 else f"n{1:0{width}d}",
                          "slots": per + 1})
        if info.hosts > extra:
            first = extra + 1
            hosts.append({"name": f"n[{first:0{width}d}-{info.hosts:0{width}d}]" if info.hosts > first
                          else f"n{first:0{width}d}", "slots": per})
        groups.append({"name": "cpu", "hosts": [h["name"] for h in hosts]})
    elif info.processors:
        hosts.append({"name": "n1", "slots": info.processors})
        groups.append({"name": "cpu", "hosts": ["n1"]})
    out_consumers: list[dict] = []
    if base:
        parts = base.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            out_consumers.append({"path": "/" + "/".join(parts[:depth])})
    out_consumers += [{"path": c, "share_ratio": 1} for c in consumers]
    return {"hosts": hosts, "resource_groups": groups, "consumers": out_consumers}


# --- rendering -----------------------------------------------------------------


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) and not value.is_integer() else str(int(value))
    if isinstance(value, str) and re.fullmatch(r"(/[A-Za-z][0-9A-Za-z_-]*)+", value):
        return value  # a consumer path reads better bare
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def render_map(mapping: Mapping, comment: str = "") -> str:
    """The mapping as a YAML mapping file (one rule a line), loadable by ``load_mapping``."""
    lines = [f"# {line}" for line in comment.splitlines()]
    lines.append(f"default: {_scalar(mapping.default)}")
    if mapping.checkpoint is not None:
        lines.append(f"checkpoint: {_scalar(mapping.checkpoint)}")
    if not mapping.rules:
        lines.append("rules: []")
    else:
        lines.append("rules:")
        for rule in mapping.rules:
            item = {k: v for k, v in rule.match}
            item["consumer"] = rule.consumer
            if rule.checkpoint is not None:
                item["checkpoint"] = rule.checkpoint
            lines.append(f"  - {_scalar(item)}")
    return "\n".join(lines) + "\n"


def render_plan(plan: dict[str, Any], comment: str = "") -> str:
    """A plan fragment (hosts, resource_groups, consumers) as YAML, one item a line."""
    lines = [f"# {line}" for line in comment.splitlines()]
    for key in ("hosts", "resource_groups", "consumers"):
        items = plan.get(key, [])
        if not items:
            lines.append(f"{key}: []")
            continue
        lines.append(f"{key}:")
        lines += [f"  - {_scalar(item)}" for item in items]
    for key, value in plan.items():
        if key not in ("hosts", "resource_groups", "consumers"):
            lines.append(f"{key}: {_scalar(value)}")
    return "\n".join(lines) + "\n"
