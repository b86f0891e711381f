"""The plan a replay runs under: the plan file as written, or, when it names no hosts,
with a cluster built from what the trace says of its own.

A plan that names neither ``hosts`` nor ``resource_groups`` gets them from the trace
(``TraceInfo``, as ``apportion simulate map --plan-out`` writes them):

- the trace's jobs say what they need of each kind (Alibaba's pods: cores, memory, GPUs):
  one host per machine of its node list with ``resources: {cores, memory, gpus}`` (and
  its GPU model as attribute ``model``), all in one group ``nodes``; its jobs ask the
  engine for those vectors and Dominant Resource Fairness shares the cluster
  (``vector_cluster``);
- the trace lists its machines otherwise (DUCC's node file): one host per
  machine, CPUs in group ``cpu``, GPUs in group ``gpu``;
- otherwise SWF's MaxProcs slots over its MaxNodes hosts (``n[1-N]``, group ``cpu``),
  or over hosts of ``host_slots`` slots when given.

Rigid jobs take ``order`` 1 slots anywhere in their group, so how the slots are cut
into hosts changes no figure, only the cost: fewer, larger hosts mean fewer
allocations per job (``--host-slots``).
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

from apportion.engine import Plan
from apportion.plan import PlanError, Problem
from apportion.plan.positions import load_document
from apportion.traces.mapping import _ranges, plan_skeleton
from apportion.traces.record import TraceInfo


VECTOR_TRACES = ("alibaba",)
"""Trace kinds whose jobs carry ``resources`` (what each slot needs of each kind) and whose
machines say what they have of each: replayed on hosts with resources."""

VECTOR_GROUP = "nodes"


def vector_cluster(info: TraceInfo) -> dict[str, Any]:
    """One host per machine with ``resources: {cores, memory, gpus}`` (its GPU model as
    attribute ``model``), consecutive machines of the same size and model in one range
    (``node-[0001-0009]``), all in the group ``nodes`` in the node list's order."""
    hosts: list[dict[str, Any]] = []
    run: list[str] = []
    key: tuple | None = None

    def flush() -> None:
        if not run:
            return
        cores, memory, gpus, model = key  # type: ignore[misc]
        entry: dict[str, Any] = {"resources": {"cores": cores, "memory": memory, "gpus": gpus}}
        if model:
            entry["attributes"] = {"model": model}
        hosts.extend({"name": pattern, **entry} for pattern in _ranges(run))
        run.clear()

    for m in info.machines:
        cores = m.cores if m.cores is not None else m.cpus
        k = (int(cores) if float(cores).is_integer() else cores, _number(m.memory or 0.0), m.gpus, m.model)
        if k != key:
            flush()
            key = k
        run.append(m.name)
    flush()
    names = _ranges([m.name for m in info.machines])
    return {"hosts": hosts, "resource_groups": [{"name": VECTOR_GROUP, "hosts": names}]}


def _number(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def cluster_from_info(info: TraceInfo, host_slots: int | None = None,
                      resources: tuple[str, ...] = ("cpu", "gpu")) -> dict[str, Any]:
    """``hosts`` and ``resource_groups`` plan sections for the cluster a trace describes
    (``traces.mapping.plan_skeleton``, or ``vector_cluster`` for a trace whose jobs and
    machines say what they need and have of each kind); ``host_slots`` cuts its
    processors into hosts of that many slots instead of the trace's own host count."""
    if info.kind in VECTOR_TRACES and info.machines:
        return vector_cluster(info)
    if host_slots and not info.machines and info.processors:
        info = replace(info, hosts=max(1, math.ceil(info.processors / host_slots)))
    built = plan_skeleton(info, (), resources=resources)
    if not built["hosts"]:
        raise PlanError([Problem(info.source, None, "hosts",
                                 "the plan names no hosts and the trace does not say how large its cluster is: "
                                 "add hosts and resource_groups to the plan")])
    return {"hosts": built["hosts"], "resource_groups": built["resource_groups"]}


def names_hosts(data: Any) -> bool:
    return isinstance(data, dict) and bool(data.get("hosts") or data.get("resource_groups"))


def load_sim_plan(path: str | os.PathLike[str], info: TraceInfo | None, host_slots: int | None = None,
                  data: dict[str, Any] | None = None) -> tuple[Plan, dict[str, Any]]:
    """The plan at ``path`` (or its already-read and changed ``data``, for sweeps), its
    cluster built from ``info`` when it names none. Returns the plan and the data compiled."""
    from apportion.plan.compile import plan_of

    doc = load_document(path)
    if data is not None:
        doc = replace(doc, data=data, positions={}, text=None)
    if not names_hosts(doc.data) and info is not None and not (isinstance(doc.data, dict) and "ducc" in doc.data):
        built = dict(doc.data or {})
        built.update(cluster_from_info(info, host_slots))
        doc = replace(doc, data=built, positions={}, text=None)
    return plan_of(doc), doc.data
