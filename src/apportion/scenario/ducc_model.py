"""A DUCC scenario, compiled: a DUCC configuration and a timeline of jobs, cancels and node events.

Built by ``apportion.plan.ducc_scenario`` from a scenario file (docs/plan-format.md,
"DUCC scenarios") and driven by ``apportion.scenario.ducc_runner``. Everything here
is frozen and already checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from apportion.engine.ducc.config import DuccConfig

DEFAULT_THREADS = 4  # DUCC's default threads per process (process_pipeline_count)


DEFAULT_HORIZON = 7 * 24 * 3600.0  # seconds of simulated time: a clocked run without `until` ends there

@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job (or, with ``reserve``, a reservation) as submitted.

    ``work_items`` None: the job never runs out of work (a service); it runs until
    cancelled. ``seq`` orders submissions (ties in time go by it).
    """

    id: str
    user: str
    cls: str
    memory: float  # GB per process
    max_processes: int | None = None
    threads: int = DEFAULT_THREADS
    work_items: int | None = None
    init_seconds: float = 0.0
    seconds_per_item: float = 1.0
    reserve: bool = False
    submitted: float = 0.0
    seq: int = 0


@dataclass(frozen=True, slots=True)
class NodeEvents:
    """What happens to nodes at a step (host names, ranges expanded).

    ``dead``: heartbeats stop (the node's work is purged); ``alive``: heartbeats
    resume. ``vary_off`` / ``vary_on``: the administrator takes the node out of
    scheduling and puts it back. ``unavailable`` / ``available``: the node reports
    it cannot take new work, and that it can again.
    """

    dead: tuple[str, ...] = ()
    alive: tuple[str, ...] = ()
    vary_off: tuple[str, ...] = ()
    vary_on: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()
    available: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return any((self.dead, self.alive, self.vary_off, self.vary_on, self.unavailable, self.available))


NODE_EVENTS = ("dead", "alive", "vary_off", "vary_on", "unavailable", "available")


@dataclass(frozen=True, slots=True)
class DuccStep:
    at: float
    jobs: tuple[JobSpec, ...] = ()
    cancel: tuple[str, ...] = ()
    nodes: NodeEvents = NodeEvents()
    config: DuccConfig | None = None  # a new configuration from this step on
    label: str = ""  # where it came from: timeline[3], or replay mega-12
    report: bool = True  # a snapshot is taken at this step (report: steps)


@dataclass(frozen=True, slots=True)
class DuccScenario:
    config: DuccConfig
    steps: tuple[DuccStep, ...]
    cycle: float | None = 10.0  # seconds between cycles; None: settle at each step, no clock
    report: str = "steps"  # or "cycles"
    until: float | None = None  # stop the clock here (None: when all work is done)
    source: str = "<scenario>"
    # without ``until``, the clock stops here at the latest, work left or not (None: never)
    horizon: float | None = DEFAULT_HORIZON
