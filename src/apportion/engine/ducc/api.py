"""The DUCC scheduling cycle's public interface: what goes in, what comes out.

This is the pure core of DUCC's Resource Manager (the "NodepoolScheduler").
It reads no files and no clock and draws no random numbers: the caller owns
time and passes ``now`` in, and the same input always gives the same output.

How a caller drives it
----------------------
The caller (a scenario runner, a benchmark, a real outer layer) keeps a
:class:`DuccState` -- the machines, the jobs as known now, the processes
running, the processes being removed, last cycle's needy jobs -- and calls::

    decisions = schedule(config, state, now)          # one full cycle
    state = advance(state, decisions)                  # publish it

``schedule`` runs the whole cycle: node states, blacklisting, job caps, How
Much (best priority first), What Of (placement), evictions, defragmentation.
It returns a :class:`DuccDecisions`: processes to start, processes to evict
(with a reason), processes lost, and per-job accounting.

``advance`` gives the state right after the decisions are published: new
processes are added (not initialised, started at ``now``), evicted processes
are marked *pending removal*, processes purged from dead nodes are gone, the
needy jobs are remembered (they are placed first next cycle).

**Evicted processes stay occupied until the caller confirms them gone**, as in
DUCC: their space is not given to anyone until then. A simulator confirms
them at the start of the next cycle (``confirm_gone(state)``), so space freed
by an eviction is used the cycle after. Between cycles the caller also
updates what it knows: work items done (``Job.done_items``), a process having
initialised (``Process.initialized``), its ``investment``, jobs that ended
(remove them and their processes), nodes (``Machine.state``,
``missed_heartbeats``), and it may pass a new :class:`DuccConfig`
(reconfiguration: work that no longer belongs where it runs is blacklisted).

Units: memory in GB; an order is a number of quanta of the machine's top-level
nodepool: machine order = floor((memory - reserved) / quantum), process order
= ceil(memory / quantum).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import replace

from apportion.engine.ducc.config import DuccConfig
from apportion.engine.ducc.cycle import run_cycle
from apportion.engine.ducc.types import (
    DuccDecisions,
    DuccState,
    EvictReason,
    Eviction,
    Job,
    JobAccount,
    JobKind,
    JobStateName,
    Lost,
    Machine,
    MachineState,
    NewProcess,
    Process,
    machine_order,
    machines_from_config,
    process_order,
)

__all__ = [
    "advance",
    "confirm_gone",
    "schedule",
    "DuccDecisions",
    "DuccState",
    "EvictReason",
    "Eviction",
    "Job",
    "JobAccount",
    "JobKind",
    "JobStateName",
    "Lost",
    "Machine",
    "MachineState",
    "NewProcess",
    "Process",
    "machine_order",
    "machines_from_config",
    "process_order",
]


# --- the entry points --------------------------------------------------------

def schedule(config: DuccConfig, state: DuccState, now: float) -> DuccDecisions:
    """One full DUCC cycle over ``state`` under ``config`` at time ``now`` (seconds)."""
    # the cycle makes many short-lived objects and no reference cycles: the collector
    # would only rescan the caller's state (a third of the time at 5,000 jobs)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return run_cycle(config, state, now)
    finally:
        if was_enabled:
            gc.enable()


def advance(state: DuccState, decisions: DuccDecisions) -> DuccState:
    """The state right after ``decisions`` are published (see the module doc)."""
    purged = {e.share_id for e in decisions.evictions if e.reason == "node-dead"}
    purged.update(lost.share_id for lost in decisions.lost)
    kept = tuple(p for p in state.processes if p.share_id not in purged) if purged else state.processes
    added = tuple(Process(n.share_id, n.job, n.machine, n.order, False, decisions.now, 0.0) for n in decisions.new)
    pending = (state.pending_removal | {e.share_id for e in decisions.evictions}) - purged
    return replace(state, processes=kept + added, pending_removal=frozenset(pending),
                   needy=decisions.needy, next_share_id=decisions.next_share_id)


def confirm_gone(state: DuccState, share_ids: Iterable[int] | None = None) -> DuccState:
    """The caller confirms evicted processes have left: every pending one (None) or those named."""
    gone = set(state.pending_removal if share_ids is None else share_ids) & state.pending_removal
    if not gone:
        return state
    return replace(state, processes=tuple(p for p in state.processes if p.share_id not in gone),
                   pending_removal=state.pending_removal - gone)
