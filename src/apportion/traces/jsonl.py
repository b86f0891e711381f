"""apportion's own trace format: JSON Lines, one object a line (plain or gzip).

The first line may be the header, ``{"info": {...}}``, with any of ``TraceInfo``'s
fields but ``kind`` and ``source``::

    {"info": {"hosts": 128, "slots_per_host": 1, "processors": 128}}

Every other line is one job, in submit order (a job submitted before the previous one
is a bad line), with ``TraceJob``'s fields; ``id``, ``submit``, ``run`` and ``slots``
are required, the rest optional with TraceJob's defaults::

    {"id": "1", "submit": 0, "run": 1451, "slots": 128, "user": "1", "group": "1"}
    {"id": "g7", "submit": 3.5, "run": 60, "slots": 2, "resource": "gpu", "queue": "LS"}
    {"id": "mega-3", "submit": 12, "run": 400, "slots": 1, "user": "Hilaria",
     "ducc": {"memory": 28, "threads": 4, "items": 100, "item_seconds": 4.0, "cls": "normal",
              "max_processes": 94}}

``submit`` and ``run`` are seconds (numbers >= 0, ``run`` > 0), ``slots`` a whole number
>= 1, ``resource`` "cpu" or "gpu", ``memory`` GB per slot and ``checkpoint`` seconds
(numbers > 0, or null), the four match fields strings (numbers are taken as their text),
``resources`` an object of kind -> amount each slot needs (numbers >= 0, one above 0:
``{"cores": 6, "gpus": 0.46, "memory": 12}``).
An unknown key, a missing required key or a value of the wrong kind is a bad line naming
the field. Blank lines are ignored.

``write_jsonl(path, jobs, info)`` writes this format (gzip when the name ends in
``.gz``), leaving out the fields that have their default.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import fields
from typing import Any

from apportion.traces.record import MATCH_FIELDS, RESOURCES, DuccWork, Machine, TraceInfo, TraceJob
from apportion.traces.textfile import Interner, TraceFile, numbered_lines

JOB_FIELDS = tuple(f.name for f in fields(TraceJob))
REQUIRED = ("id", "submit", "run", "slots")
DUCC_FIELDS = tuple(f.name for f in fields(DuccWork))
INFO_FIELDS = tuple(f.name for f in fields(TraceInfo) if f.name not in ("kind", "source"))
MACHINE_FIELDS = tuple(f.name for f in fields(Machine))
_DEFAULTS = {f.name: f.default for f in fields(TraceJob)}


class _Bad(Exception):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


def _number(value: Any, name: str, *, above_zero: bool = False, nullable: bool = False) -> float | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Bad(name, f"{value!r} is not a number")
    if above_zero and value <= 0:
        raise _Bad(name, f"must be above 0 (got {value!r})")
    if value < 0:
        raise _Bad(name, f"must be 0 or more (got {value!r})")
    return float(value)


def _whole(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise _Bad(name, f"{value!r} is not a whole number")
    if value < minimum:
        raise _Bad(name, f"must be at least {minimum} (got {value})")
    return value


def _text(value: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _Bad(name, f"{value!r} is not a string")


def _unknown(data: dict, known: tuple[str, ...], where: str = "") -> None:
    for key in data:
        if key not in known:
            raise _Bad(where + str(key), f"unknown field; known: {', '.join(known)}")


def _ducc(value: Any) -> DuccWork:
    if not isinstance(value, dict):
        raise _Bad("ducc", "must be an object")
    _unknown(value, DUCC_FIELDS, "ducc.")
    for key in ("memory", "threads", "items", "item_seconds"):
        if key not in value:
            raise _Bad(f"ducc.{key}", "is required")
    cap = value.get("max_processes")
    return DuccWork(
        memory=_number(value["memory"], "ducc.memory", above_zero=True),  # type: ignore[arg-type]
        threads=_whole(value["threads"], "ducc.threads", 1),
        items=_whole(value["items"], "ducc.items", 1),
        item_seconds=_number(value["item_seconds"], "ducc.item_seconds", above_zero=True),  # type: ignore[arg-type]
        cls=_text(value.get("cls", ""), "ducc.cls"),
        max_processes=None if cap is None else _whole(cap, "ducc.max_processes", 1),
    )


def _kinds(value: Any) -> tuple[tuple[str, float], ...]:
    """``resources``: an object of kind -> amount (each 0 or more, one above 0), as sorted pairs."""
    if not isinstance(value, dict) or not value:
        raise _Bad("resources", "must be an object of kind -> amount, e.g. {\"cores\": 2, \"gpus\": 0.5}")
    pairs = tuple(sorted((str(k), _number(v, f"resources.{k}")) for k, v in value.items()))
    if not any(a > 0 for _, a in pairs):  # type: ignore[operator]
        raise _Bad("resources", "asks for nothing: one amount must be above 0")
    return pairs  # type: ignore[return-value]


def job_from_dict(data: Any, intern: Any = str) -> TraceJob:
    """A TraceJob from one decoded line; ``_Bad`` names the field that is wrong."""
    if not isinstance(data, dict):
        raise _Bad("line", "a job line must be a JSON object")
    _unknown(data, JOB_FIELDS)
    for key in REQUIRED:
        if key not in data:
            raise _Bad(key, "is required")
    resource = data.get("resource", "cpu")
    if resource not in RESOURCES:
        raise _Bad("resource", f"{resource!r} is not one of {', '.join(RESOURCES)}")
    match = {k: intern(_text(data[k], k)) for k in MATCH_FIELDS if k in data}
    return TraceJob(
        id=_text(data["id"], "id"),
        submit=_number(data["submit"], "submit"),  # type: ignore[arg-type]
        run=_number(data["run"], "run", above_zero=True),  # type: ignore[arg-type]
        slots=_whole(data["slots"], "slots", 1),
        resource=resource,
        memory=_number(data.get("memory"), "memory", above_zero=True, nullable=True),
        checkpoint=_number(data.get("checkpoint"), "checkpoint", above_zero=True, nullable=True),
        walltime=_number(data.get("walltime"), "walltime", above_zero=True, nullable=True),
        ducc=None if data.get("ducc") is None else _ducc(data["ducc"]),
        resources=() if data.get("resources") is None else _kinds(data["resources"]),
        **match,
    )


def info_from_dict(data: Any, source: str) -> TraceInfo:
    if not isinstance(data, dict):
        raise _Bad("info", "must be an object")
    _unknown(data, INFO_FIELDS, "info.")
    values: dict[str, Any] = {}
    for key in ("hosts", "slots_per_host", "processors", "gpus", "jobs"):
        if data.get(key) is not None:
            values[key] = _whole(data[key], f"info.{key}", 0)
    if data.get("start") is not None:
        values["start"] = _number(data["start"], "info.start")
    for key in ("queues", "partitions", "notes"):
        if key in data:
            if not isinstance(data[key], dict):
                raise _Bad(f"info.{key}", "must be an object of names")
            values[key] = {str(k): _text(v, f"info.{key}.{k}") for k, v in data[key].items()}
    if "machines" in data:
        if not isinstance(data["machines"], list):
            raise _Bad("info.machines", "must be a list")
        machines = []
        for i, m in enumerate(data["machines"]):
            where = f"info.machines[{i}]"
            if not isinstance(m, dict) or "name" not in m:
                raise _Bad(where, "must be an object with a name")
            _unknown(m, MACHINE_FIELDS, where + ".")
            machines.append(Machine(
                _text(m["name"], where + ".name"), _whole(m.get("cpus", 0), where + ".cpus", 0),
                _whole(m.get("gpus", 0), where + ".gpus", 0),
                _number(m.get("memory"), where + ".memory", nullable=True), _text(m.get("model", ""), where + ".model"),
                _number(m.get("cores"), where + ".cores", nullable=True),
            ))
        values["machines"] = tuple(machines)
    return TraceInfo("jsonl", source, **values)


class JsonlTrace(TraceFile):
    """An apportion JSONL trace (plain or gzip); ``info`` from its header line if any."""

    kind = "jsonl"

    def __init__(self, path: str | os.PathLike[str], skip_bad: int = 0) -> None:
        super().__init__(path, skip_bad)
        self.info = TraceInfo("jsonl", self.path)
        with closing(numbered_lines(self.path)) as lines:
            self._read_header(lines)

    def _read_header(self, lines: Iterator[tuple[int, str]]) -> None:
        for number, line in lines:
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError:
                break  # the jobs' reading reports it
            if isinstance(data, dict) and "info" in data:
                try:
                    _unknown(data, ("info",))
                    self.info = info_from_dict(data["info"], self.path)
                except _Bad as exc:
                    self._bad(number, exc.field, exc.reason)
            break

    def _jobs(self) -> Iterator[TraceJob]:
        intern = Interner()
        last = 0.0
        first = True
        for number, line in numbered_lines(self.path):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                self._bad(number, "line", f"not JSON: {exc}")
                continue
            if first and isinstance(data, dict) and "info" in data:
                first = False
                try:  # read at open too; checked again so that a skipped header is counted
                    _unknown(data, ("info",))
                    info_from_dict(data["info"], self.path)
                except _Bad as exc:
                    self._bad(number, exc.field, exc.reason)
                continue
            first = False
            try:
                job = job_from_dict(data, intern)
            except _Bad as exc:
                self._bad(number, exc.field, exc.reason)
                continue
            if self._out_of_order(number, "submit", job.submit, last, "job"):
                continue
            last = job.submit
            yield job


def job_to_dict(job: TraceJob) -> dict[str, Any]:
    """The JSONL object for ``job``: the fields that differ from their default."""
    out: dict[str, Any] = {"id": job.id, "submit": job.submit, "run": job.run, "slots": job.slots}
    for name in JOB_FIELDS[4:]:
        value = getattr(job, name)
        if value != _DEFAULTS[name]:
            if name == "ducc":
                value = {f: getattr(value, f) for f in DUCC_FIELDS}
            elif name == "resources":
                value = dict(value)
            out[name] = value
    return out


def info_to_dict(info: TraceInfo) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in INFO_FIELDS:
        value = getattr(info, name)
        if value is None or value == () or value == {}:
            continue
        if name == "machines":
            value = [{f: getattr(m, f) for f in MACHINE_FIELDS} for m in value]
        out[name] = value
    return out


def _compact(value: Any) -> Any:
    """Whole floats written as integers (``0`` rather than ``0.0``): shorter files."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def write_jsonl(path: str | os.PathLike[str], jobs: Iterable[TraceJob], info: TraceInfo | None = None) -> int:
    """Write ``jobs`` (in submit order) as an apportion JSONL trace, with ``info`` as its
    header line when given; gzip when ``path`` ends in ``.gz``. Returns the jobs written."""
    target = os.fspath(path)
    raw = gzip.open(target, "wb", compresslevel=6) if target.endswith(".gz") else open(target, "wb")
    dumps = json.JSONEncoder(separators=(",", ":")).encode  # ASCII: no line separator in a line
    count = 0
    with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as out:  # type: ignore[arg-type]
        if info is not None:
            out.write(dumps({"info": info_to_dict(info)}) + "\n")
        for job in jobs:
            data = job_to_dict(job)
            for key in ("submit", "run", "memory", "checkpoint"):
                if key in data:
                    data[key] = _compact(data[key])
            out.write(dumps(data) + "\n")
            count += 1
    return count
