"""DUCC's system-test workloads: a ``jobs.in`` directory of job specs and a ``jobs.prepare`` file.

DUCC's own tests (``../shared/traces/ducc/mega-*``) describe a workload as

- ``jobs.in/*.job``: one job per file, ``key = value`` lines with ``#`` comments:
  ``tod`` (submission time, ms since the start of the recording), ``elapsed``
  (the run time of every work item, ms, one number per item), ``threads``
  (threads per process), ``user``, ``memory`` (GB per process), ``class`` and
  ``machines`` (the most processes the job may have; absent: no cap);
- ``jobs.prepare``: how DUCC's test driver turns those into a run, in the same
  ``key = value`` form (``#`` starts a comment anywhere on a line):
  ``compression`` (every time in the job files is divided by it),
  ``submission.spread`` (seconds the submissions are spread over),
  ``scheduling.classes`` / ``scheduling.classes.NAME`` (classes to draw from, with
  weights), ``job.memory`` / ``job.memory.GB`` (memory sizes to draw from, with
  weights), ``rewrite`` (false: keep each job's own class and memory) and
  ``random.seed``. Other keys (``src.dir``, ``dest.dir``, ``job.services*``) are read
  and ignored: services are not replayed.

apportion's reading (the files do not say more):

- a job is submitted at ``tod / max(tod) * submission.spread`` seconds when the
  file gives a spread, else at ``tod / compression`` ms;
- a work item takes ``elapsed / compression`` ms; apportion's scenario jobs have
  one time per item, so a job's ``seconds_per_item`` is the mean of its items;
- with ``rewrite`` (the default, as in DUCC's driver) each job's class and memory
  are drawn from the weighted lists with a ``random.Random(random.seed)`` in file
  name order: the same every run, though not the draw DUCC's Java driver made; a
  list that is absent leaves the job's own value;
- ``tod = TOD``-style seeds (time of day) are read as seed 0, so replays stay
  repeatable.

``read_workload`` returns the jobs in submission order; every problem is a
``Problem`` with file and line, all reported together in one ``PlanError``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from apportion.importers.ducc.values import BadValue, read_bool, read_int, read_memory
from apportion.plan.errors import PlanError, Problem

JOBS_DIR = "jobs.in"
PREPARE_FILE = "jobs.prepare"
JOB_KEYS = ("tod", "elapsed", "threads", "user", "memory", "class", "machines")
PREPARE_KEYS_IGNORED = ("src.dir", "dest.dir")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a DUCC test workload, with its times already compressed (seconds)."""

    name: str  # the job file's name without .job: mega-12
    submit_s: float
    user: str
    cls: str | None
    memory: int | float  # GB per process
    threads: int
    max_processes: int | None
    items: int
    seconds_per_item: float
    file: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Prepare:
    """The settings of a ``jobs.prepare`` file that a replay uses."""

    compression: float = 1.0
    spread_s: float | None = None
    classes: Mapping[str, int] = field(default_factory=dict)  # class -> weight, file order
    memory: Mapping[str, int] = field(default_factory=dict)  # GB as written -> weight
    rewrite: bool = True
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Workload:
    directory: str
    prepare: Prepare
    jobs: tuple[TraceJob, ...]


_COMMENT = re.compile(r"\s#.*$|^#.*$")


def _lines(path: Path, problems: list[Problem]):
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(path), None, "file", f"cannot read: {getattr(exc, 'strerror', None) or exc}"))
        return
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if line:
            yield number, line


def _split(line: str) -> tuple[str, str]:
    key, eq, value = line.partition("=")
    if not eq:
        raise BadValue("expected KEY = VALUE")
    return key.strip(), value.strip()


def _positive_number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadValue(f"{text!r} is not a number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise BadValue(f"{what} must be a number above 0 (got {text})")
    return value


def read_prepare(path: Path, problems: list[Problem]) -> Prepare:
    values: dict[str, tuple[int, str]] = {}
    for number, line in _lines(path, problems):
        try:
            key, value = _split(line)
        except BadValue as exc:
            problems.append(Problem(str(path), number, "line", str(exc)))
            continue
        if key in values:
            problems.append(Problem(str(path), number, key, f"given twice (first at line {values[key][0]})"))
            continue
        values[key] = (number, value)

    def get(key: str, read, default):
        if key not in values:
            return default
        number, text = values[key]
        try:
            return read(text)
        except BadValue as exc:
            problems.append(Problem(str(path), number, key, str(exc)))
            return default

    def weights(list_key: str, read_name) -> dict[str, int]:
        out: dict[str, int] = {}
        if list_key not in values:
            return out
        number, text = values[list_key]
        for name in text.split():
            try:
                read_name(name)
            except BadValue as exc:
                problems.append(Problem(str(path), number, list_key, str(exc)))
                continue
            key = f"{list_key}.{name}"
            if key not in values:
                problems.append(Problem(str(path), number, list_key, f"{name} has no weight ({key} is missing)"))
                continue
            w = get(key, lambda t: read_int(t, minimum=0, what="a whole-number weight"), None)
            if w is not None:
                out[name] = w
        return out

    seed_text = values.get("random.seed", (0, "0"))[1]
    seed = 0 if seed_text.upper() == "TOD" else get("random.seed", lambda t: read_int(t), 0)
    return Prepare(
        compression=get("compression", lambda t: _positive_number(t, "compression"), 1.0),
        spread_s=get("submission.spread", lambda t: _positive_number(t, "submission.spread"), None),
        classes=weights("scheduling.classes", lambda n: n),
        memory=weights("job.memory", read_memory),
        rewrite=get("rewrite", read_bool, True),
        seed=seed,
    )


@dataclass
class _RawJob:
    file: Path
    tod: float | None = None
    elapsed: list[float] = field(default_factory=list)
    threads: int | None = None
    user: str | None = None
    memory: int | float | None = None
    cls: str | None = None
    machines: int | None = None


def read_job_file(path: Path, problems: list[Problem]) -> _RawJob | None:
    job = _RawJob(path)
    seen: dict[str, int] = {}
    before = len(problems)
    for number, line in _lines(path, problems):
        key = "line"
        try:
            key, value = _split(line)
            if key not in JOB_KEYS:
                close = [k for k in JOB_KEYS if k.startswith(key[:3])]
                raise BadValue(f"unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
            if key in seen:
                raise BadValue(f"{key} given twice (first at line {seen[key]})")
            seen[key] = number
            if key == "tod":
                job.tod = float(read_int(value, minimum=0, what="a whole number of milliseconds"))
            elif key == "elapsed":
                job.elapsed = [float(read_int(v, minimum=0, what="a whole number of milliseconds"))
                               for v in value.split()]
                if not job.elapsed:
                    raise BadValue("elapsed lists no work item")
            elif key == "threads":
                job.threads = read_int(value, minimum=1)
            elif key == "user":
                if not value or any(c.isspace() for c in value):
                    raise BadValue(f"{value!r} is not a user name")
                job.user = value
            elif key == "memory":
                job.memory = read_memory(value)
                if job.memory <= 0:
                    raise BadValue("memory must be above 0 GB")
            elif key == "class":
                job.cls = value or None
            elif key == "machines":
                job.machines = read_int(value, minimum=1)
        except BadValue as exc:
            problems.append(Problem(str(path), number, key, str(exc)))
    for key in ("tod", "elapsed", "user", "memory"):
        if key not in seen:
            problems.append(Problem(str(path), None, key, "is required"))
    return job if len(problems) == before else None


def read_workload(directory: str | Path, *, compression: float | None = None, rewrite: bool | None = None,
                  seed: int | None = None,
                  skip_file: Callable[[list[Problem]], None] | None = None) -> Workload:
    """Read a DUCC test workload directory (``jobs.in/`` and, if present, ``jobs.prepare``).

    ``compression``, ``rewrite`` and ``seed`` override the ``jobs.prepare`` values.
    ``skip_file``, when given, is called with the problems of each job file that cannot be
    read; when it returns (rather than raising), that file is left out instead of failing
    the workload (the trace readers' ``--skip-bad``).
    """
    base = Path(directory)
    problems: list[Problem] = []
    if not base.is_dir():
        raise PlanError([Problem(str(base), None, "directory", "no such directory")])
    jobs_dir = base / JOBS_DIR
    if not jobs_dir.is_dir():
        raise PlanError([Problem(str(base), None, JOBS_DIR, f"no {JOBS_DIR}/ directory of job files here")])
    prepare_path = base / PREPARE_FILE
    prep = read_prepare(prepare_path, problems) if prepare_path.is_file() else Prepare()
    if compression is not None:
        prep = Prepare(compression, prep.spread_s, prep.classes, prep.memory, prep.rewrite, prep.seed)
    if rewrite is not None:
        prep = Prepare(prep.compression, prep.spread_s, prep.classes, prep.memory, rewrite, prep.seed)
    if seed is not None:
        prep = Prepare(prep.compression, prep.spread_s, prep.classes, prep.memory, prep.rewrite, seed)

    files = sorted(jobs_dir.glob("*.job"), key=_natural)
    if not files:
        problems.append(Problem(str(jobs_dir), None, JOBS_DIR, "no *.job files"))
    raws = []
    for p in files:
        mine: list[Problem] = []
        raw = read_job_file(p, mine)
        if mine and skip_file is not None:
            skip_file(mine)
            continue
        problems.extend(mine)
        raws.append(raw)
    if problems:
        raise PlanError(problems)
    raws_ok = [r for r in raws if r is not None]

    max_tod = max((r.tod or 0.0) for r in raws_ok) if raws_ok else 0.0
    rng = random.Random(prep.seed)
    class_names, class_weights = list(prep.classes), list(prep.classes.values())
    mem_names, mem_weights = list(prep.memory), list(prep.memory.values())
    jobs = []
    for r in raws_ok:
        assert r.tod is not None and r.user is not None and r.memory is not None
        cls, memory = r.cls, r.memory
        if prep.rewrite:
            if class_names and sum(class_weights) > 0:
                cls = rng.choices(class_names, class_weights)[0]
            if mem_names and sum(mem_weights) > 0:
                memory = read_memory(rng.choices(mem_names, mem_weights)[0])
        if prep.spread_s is not None and max_tod > 0:
            submit = r.tod / max_tod * prep.spread_s
        else:
            submit = r.tod / prep.compression / 1000.0
        mean_ms = sum(r.elapsed) / len(r.elapsed)
        jobs.append(TraceJob(
            name=r.file.stem,
            submit_s=round(submit, 3),
            user=r.user,
            cls=cls,
            memory=memory,
            threads=r.threads or 1,
            max_processes=r.machines,
            items=len(r.elapsed),
            seconds_per_item=max(0.001, round(mean_ms / prep.compression / 1000.0, 3)),
            file=str(r.file),
        ))
    jobs.sort(key=lambda j: (j.submit_s, _natural(Path(j.name))))
    return Workload(str(base), prep, tuple(jobs))


def _natural(path: Path) -> tuple:
    """mega-2 before mega-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))
