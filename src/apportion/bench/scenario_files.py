"""The synthetic workloads of ``apportion bench`` written as scenario files, the way a
user hands them to ``apportion solve``.

- ``ego_scenario``: the engine benchmark's cluster (``bench/workload.py``) as a plan
  (hosts as one range per resource group, every consumer with its settings per group)
  and a timeline of two steps: every request at t = 0, then one step changing
  ``change_fraction`` of them (a third released, the rest given a new ``max``, as
  many new ones as were released), as ``Churn`` makes them.
- ``ducc_scenario``: the DUCC benchmark's cluster and jobs (``bench/ducc_bench.py``)
  as a DUCC scenario: the configuration in the form ``apportion import ducc`` writes,
  the machines' memory, the clock and the jobs.

Both are plain mappings; ``write_json`` writes one as JSON text (JSON is YAML, so the
file is a ``.yaml`` scenario like any other).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from apportion.bench.ducc_bench import DuccBenchSpec, make_scenario
from apportion.bench.workload import Churn, WorkloadSpec, make_workload
from apportion.engine.model import GroupSettings, Plan, Request
from apportion.importers.ducc import config_to_mapping

# settings written for a consumer, with the default they may be left out at
_SETTINGS = {"owned": 0, "share_ratio": 1, "priority": None, "rank": None, "max": None, "lend": False,
             "lend_limit": None, "grace": 0.0}


def _settings(gs: GroupSettings) -> dict[str, Any]:
    return {k: getattr(gs, k) for k, default in _SETTINGS.items() if getattr(gs, k) != default}


def _consumer(c, all_groups: list[str]) -> dict[str, Any]:
    per_group = {g: _settings(gs) for g, gs in c.groups.items()}
    # what every group shares is written once, consumer-wide; the rest per group
    common = {k: v for k, v in next(iter(per_group.values()), {}).items()
              if all(s.get(k) == v for s in per_group.values())}
    out: dict[str, Any] = {"path": c.path}
    if list(c.groups) != all_groups:
        out["resource_groups"] = list(c.groups)
    out.update(common)
    groups = {g: {k: v for k, v in s.items() if k not in common} for g, s in per_group.items()}
    groups = {g: s for g, s in groups.items() if s}
    if groups:
        out["groups"] = groups
    return out


def _hosts_pattern(names: tuple[str, ...]) -> str:
    """``h0000``..``h2499`` as ``h[0000-2499]`` (the workload's names are contiguous)."""
    first, last = names[0], names[-1]
    return f"h[{first[1:]}-{last[1:]}]" if len(names) > 1 else first


def plan_mapping(plan: Plan) -> dict[str, Any]:
    slots = plan.hosts[0].slots
    names = [g.name for g in plan.groups]
    return {
        "hosts": [{"name": _hosts_pattern(g.hosts), "slots": slots} for g in plan.groups],
        "resource_groups": [{"name": g.name, "hosts": [_hosts_pattern(g.hosts)],
                             "allocation_policy": g.allocation_policy.value} for g in plan.groups],
        "consumers": [_consumer(c, names) for c in plan.consumers],
    }


def _request(r: Request) -> dict[str, Any]:
    out: dict[str, Any] = {"id": r.id, "consumer": r.consumer, "max": r.max}
    if r.min:
        out["min"] = r.min
    if r.order != 1:
        out["order"] = r.order
    if r.groups:
        out["group"] = r.groups[0] if len(r.groups) == 1 else list(r.groups)
    return out


def ego_scenario(spec: WorkloadSpec, change_fraction: float = 0.01) -> dict[str, Any]:
    """The engine benchmark's workload as a scenario: all requests at 0, one churn step at 10."""
    wl = make_workload(spec)
    changes = Churn(wl, change_fraction).step()
    step: dict[str, Any] = {"at": 10}
    submits = [_request(c.request) for c in changes if c.kind == "submit"]
    changed = {c.id: {"max": c.max} for c in changes if c.kind == "change"}
    released = [c.id for c in changes if c.kind == "release"]
    if submits:
        step["requests"] = submits
    if changed:
        step["change"] = changed
    if released:
        step["release"] = released
    return {**plan_mapping(wl.plan), "timeline": [{"at": 0, "requests": [_request(r) for r in wl.requests]}, step]}


def ducc_scenario(spec: DuccBenchSpec) -> dict[str, Any]:
    """The DUCC benchmark's cluster and jobs as a DUCC scenario file's mapping: ``spec.cycles``
    cycles after the first, ``spec.arrivals`` new jobs at each."""
    sc = make_scenario(spec)
    cfg = sc.config

    def job(j) -> dict[str, Any]:
        out = {"id": j.id, "user": j.user, "class": j.cls, "memory": j.memory, "threads": j.threads,
               "init_seconds": j.init_seconds, "seconds_per_item": j.seconds_per_item}
        if j.max_processes is not None:
            out["max_processes"] = j.max_processes
        if j.work_items is not None:
            out["work_items"] = j.work_items
        return out

    return {
        "ducc": config_to_mapping(cfg),
        "hosts": [{"name": name, "memory": mem} for name, mem in cfg.hosts.items()],
        "cycle": sc.cycle,
        "until": sc.until,
        "timeline": [{"at": s.at, "jobs": [job(j) for j in s.jobs]} for s in sc.steps],
    }


def write_json(mapping: dict[str, Any], path: str | Path) -> str:
    """Write ``mapping`` as JSON text (one item per line, so a problem's line says something); return it."""
    text = json.dumps(mapping, indent=1)
    Path(path).write_text(text, encoding="utf-8")
    return text
