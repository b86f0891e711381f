"""The plan a replay runs under: the plan file as written, or, when it names no hosts,
with a cluster built from what the trace says of its own.

A plan that names neither ``hosts`` nor ``resource_groups`` gets them from the trace
(``TraceInfo``, as ``apportion simulate map --plan-out`` writes them):

- the trace lists its machines (Alibaba's node list, DUCC's node file): one host per
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
from apportion.traces.mapping import plan_skeleton
from apportion.traces.record import TraceInfo


def cluster_from_info(info: TraceInfo, host_slots: int | None = None,
                      resources: tuple[str, ...] = ("cpu", "gpu")) -> dict[str, Any]:
    """``hosts`` and ``resource_groups`` plan sections for the cluster a trace describes
    (``traces.mapping.plan_skeleton``); ``host_slots`` cuts its processors into hosts of
    that many slots instead of the trace's own host count."""
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
