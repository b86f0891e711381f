"""`apportion sweep GRID.yaml`: plan variants over one trace, side by side.

The GRID file (YAML; paths in it are relative to its own directory)::

    plan: nasa-3-tenants.yaml          # the base plan
    trace: ../../../shared/traces/NASA-iPSC-1993-3.1-cln.swf.gz
    map: nasa-3-tenants.map.yaml       # optional
    options: {tick: 1, host_slots: 8, skip_bad: 0, kind: swf, sort: false}   # optional, as the simulate options
    grid:                              # every combination of these values (a cartesian product)
      consumers[/A].share_ratio: [1, 2, 4]
      consumers[/C].grace: [0, 600]
    variants:                          # and/or named variants, each a set of changes
      - {name: equal, set: {"consumers[/A].share_ratio": 1, "consumers[/C].share_ratio": 1}}   # quote paths in {}

A **field path** names any field of the plan: keys joined by dots, a list item by
``[N]`` (its index), ``[/path]`` (the item whose ``path`` is that: consumers) or
``[name]`` (the item whose ``name`` is that: hosts, resource groups). A missing key
at the end is added. Without ``grid`` and ``variants`` the plan runs once as it is.
With both, the grid's variants come first. Each variant is one simulation; they run
in local processes (``concurrent.futures.ProcessPoolExecutor``) or on a Dask
cluster (``--scheduler tcp://HOST:PORT``, ``--dask-local N``).
"""

from __future__ import annotations

import copy
import csv
import itertools
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from apportion.cli.tables import print_table

SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")
OPTIONS = ("tick", "host_slots", "skip_bad", "kind", "sample", "sort", "arrivals", "first")


class SweepError(ValueError):
    """A GRID file that cannot be run as written: says where."""


def parse_path(text: str) -> list[str | int | tuple[str, str]]:
    """``consumers[/A].share_ratio`` -> ["consumers", ("path", "/A"), "share_ratio"]."""
    out: list[str | int | tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        if text[pos] == ".":
            pos += 1
            continue
        m = SEGMENT.match(text, pos)
        if m is None or m.end() == pos:
            raise SweepError(f"field path {text!r}: cannot read it at {text[pos:]!r}")
        key, sel = m.group(1), m.group(2)
        if key is not None:
            out.append(key)
        elif sel.lstrip("-").isdigit():
            out.append(int(sel))
        elif sel.startswith("/"):
            out.append(("path", sel))
        elif sel:
            out.append(("name", sel))
        else:
            raise SweepError(f"field path {text!r}: an empty [] selects nothing")
        pos = m.end()
    if not out or not isinstance(out[-1], str):
        raise SweepError(f"field path {text!r}: must end with a field name")
    return out


def set_path(data: Any, text: str, value: Any) -> None:
    """Set the field ``text`` names in ``data`` (in place)."""
    steps = parse_path(text)
    node = data
    for i, step in enumerate(steps[:-1]):
        nxt = steps[i + 1]
        if isinstance(step, str):
            if not isinstance(node, dict):
                raise SweepError(f"field path {text!r}: {step} is not in a mapping")
            if step not in node:
                node[step] = [] if not isinstance(nxt, str) else {}
            node = node[step]
        else:
            if not isinstance(node, list):
                raise SweepError(f"field path {text!r}: {_show(step)} selects from a list, and this is not one")
            if isinstance(step, int):
                if not -len(node) <= step < len(node):
                    raise SweepError(f"field path {text!r}: no item {step} (the list has {len(node)})")
                node = node[step]
            else:
                field, want = step
                found = [x for x in node if isinstance(x, dict) and str(x.get(field)) == want]
                if not found:
                    raise SweepError(f"field path {text!r}: no item with {field} {want}")
                node = found[0]
    if not isinstance(node, dict):
        raise SweepError(f"field path {text!r}: {steps[-1]} is not in a mapping")
    node[steps[-1]] = value


def _show(step: Any) -> str:
    return f"[{step}]" if isinstance(step, int) else f"[{step[1]}]"


def load_grid(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The sweep a GRID file describes: base plan data, trace, map, options and variants."""
    from apportion.plan import PlanError
    from apportion.plan.positions import load_document

    doc = load_document(path)
    src = doc.source
    g = doc.data
    if not isinstance(g, dict):
        raise SweepError(f"{src}: a sweep is a mapping with plan, trace, and grid or variants")

    def where(*keys: Any) -> str:
        line = doc.positions.get(tuple(keys))
        return f"{src}:{line}" if line else src

    unknown = set(g) - {"plan", "trace", "map", "options", "grid", "variants"}
    if unknown:
        raise SweepError(f"{where(sorted(unknown)[0])}: {sorted(unknown)[0]}: unknown key; known: plan, trace, map, "
                         "options, grid, variants")
    base = Path(src).parent
    for k in ("plan", "trace"):
        if not isinstance(g.get(k), str):
            raise SweepError(f"{where(k)}: {k}: must be a file name")
    plan = base / g["plan"]
    trace = base / g["trace"]
    mapping = base / g["map"] if g.get("map") else None
    opts = g.get("options") or {}
    if not isinstance(opts, dict) or set(opts) - set(OPTIONS):
        raise SweepError(f"{where('options')}: options: a mapping of {', '.join(OPTIONS)}")
    arrivals = opts.get("arrivals", 1)
    if isinstance(arrivals, bool) or not isinstance(arrivals, (int, float)) or not arrivals > 0:
        raise SweepError(f"{where('options')}: options.arrivals: a number above 0 (2: jobs arrive twice as fast), "
                         f"not {arrivals!r}")
    first = opts.get("first")
    if first is not None and (isinstance(first, bool) or not isinstance(first, int) or first < 1):
        raise SweepError(f"{where('options')}: options.first: a whole number of jobs above 0 (the trace's first "
                         f"jobs only), not {first!r}")
    try:
        plan_data = load_document(plan).data
    except PlanError as e:
        raise SweepError(f"{where('plan')}: plan: {e.problems[0]}") from None
    variants: list[tuple[str, dict[str, Any]]] = []
    grid = g.get("grid") or {}
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise SweepError(f"{where('grid')}: grid: a mapping of field path -> list of values")
    if grid:
        keys = list(grid)
        for combo in itertools.product(*(grid[k] for k in keys)):
            sets = dict(zip(keys, combo, strict=True))
            variants.append((", ".join(f"{k}={v}" for k, v in sets.items()), sets))
    for i, v in enumerate(g.get("variants") or []):
        if not isinstance(v, dict) or not isinstance(v.get("set", {}), dict):
            raise SweepError(f"{where('variants', i)}: variants[{i}]: a mapping with name and set")
        variants.append((str(v.get("name") or f"variant {i + 1}"), dict(v.get("set") or {})))
    if not variants:
        variants.append(("as written", {}))
    out = []
    for name, sets in variants:
        data = copy.deepcopy(plan_data)
        for k, val in sets.items():
            try:
                set_path(data, k, val)
            except SweepError as e:
                raise SweepError(f"{src}: variant {name!r}: {e}") from None
        out.append({"name": name, "set": sets, "plan_data": data})
    return {"source": src, "plan": str(plan), "trace": str(trace), "map": str(mapping) if mapping else None,
            "options": opts, "variants": out}


def run_variant(job: dict[str, Any]) -> dict[str, Any]:
    """One variant, in whatever process runs it: its figures (no series)."""
    from apportion.simulate.run import simulate

    o = job["options"]
    run = simulate(job["plan"], job["trace"], job["map"], plan_data=job["plan_data"], series_points=1,
                   tick=o.get("tick"), host_slots=o.get("host_slots"), skip_bad=o.get("skip_bad", 0),
                   kind=o.get("kind"), sort=bool(o.get("sort", False)), arrivals=o.get("arrivals", 1),
                   first=o.get("first"),
                   **({"sample": o["sample"]} if "sample" in o else {}))
    return run.result


def run_sweep(spec: dict[str, Any], *, scheduler: str | None = None, dask_local: int | None = None,
              workers: int | None = None, dask_processes: bool = True) -> dict[str, Any]:
    """Every variant of ``spec``: locally in processes, or on Dask."""
    import time

    jobs = [{"plan": spec["plan"], "trace": spec["trace"], "map": spec["map"], "options": spec["options"],
             "plan_data": v["plan_data"]} for v in spec["variants"]]
    started = time.perf_counter()
    if scheduler or dask_local:
        results, where = _on_dask(jobs, scheduler, dask_local, dask_processes)
    elif (workers or os.cpu_count() or 1) == 1 or len(jobs) == 1:
        results, where = [run_variant(j) for j in jobs], "this process"
    else:
        n = min(len(jobs), workers or os.cpu_count() or 1)
        with ProcessPoolExecutor(max_workers=n) as pool:
            results = list(pool.map(run_variant, jobs))
        where = f"{n} local processes"
    return {"source": spec["source"], "trace": spec["trace"], "ran_on": where,
            "wall_seconds": time.perf_counter() - started,
            "variants": [{"name": v["name"], "set": v["set"], "result": r}
                         for v, r in zip(spec["variants"], results, strict=True)]}


def _on_dask(jobs: list[dict[str, Any]], scheduler: str | None, local: int | None,
             processes: bool) -> tuple[list[dict[str, Any]], str]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SweepError("a sweep on Dask needs Dask: pip install 'apportion[dask]'") from None
    if scheduler:
        with Client(scheduler) as client:
            return client.gather(client.map(run_variant, jobs, pure=False)), f"Dask at {scheduler}"
    import dask

    with dask.config.set({**_local_start(), **LOCAL_CLUSTER}), \
            LocalCluster(n_workers=local, threads_per_worker=1, processes=processes, dashboard_address=None) as cl, \
            Client(cl) as client:
        return client.gather(client.map(run_variant, jobs, pure=False)), f"a local Dask cluster of {local} workers"


METHOD_KEY = "distributed.worker.multiprocessing-method"
# A local cluster's settings, for a sweep's long, CPU-bound tasks:
LOCAL_CLUSTER = {
    # one variant per worker at a time: a variant lasts seconds, so a second one queued
    # on a worker early buys nothing and can leave the other worker idle at the end
    "distributed.scheduler.worker-saturation": 1.0,
    # the cluster has no dashboard, so nothing reads the workers' stack samples (taken
    # every 10 ms, under the replay's lock) or their system metrics
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
}


def _local_start() -> dict[str, str]:
    """How a local cluster starts its workers: forked from this process, which has
    already imported the simulator, on Linux where nobody chose otherwise (Dask's
    own default, ``spawn``, starts a fresh interpreter per worker that imports Dask
    and apportion again: about 0.5 s of a sweep that lasts seconds). Not on macOS,
    where forking a process that has loaded system frameworks is unsafe.
    ``DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD`` or Dask's configuration
    still decide where set."""
    import sys

    import dask

    chosen = dask.config.get(METHOD_KEY, "spawn") != "spawn" or "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD" in os.environ
    if chosen or not sys.platform.startswith("linux"):
        return {}
    import apportion.simulate.run  # noqa: F401  (imported once here, inherited by each worker)

    return {METHOD_KEY: "fork"}


# --- output -------------------------------------------------------------------------

COLUMNS = (("jobs", ("jobs",)), ("makespan_h", ("makespan",)), ("utilisation", ("utilisation",)),
           ("jain", ("fairness", "jain")), ("max_deviation", ("fairness", "max_deviation")),
           ("reclaims", ("reclaims",)), ("evictions", ("evictions",)), ("lost_slot_h", ("lost_slot_seconds",)))


def _value(res: dict[str, Any], keys: tuple[str, ...]) -> float:
    x: Any = res
    for k in keys:
        x = x[k]
    if keys in (("makespan",), ("lost_slot_seconds",)):
        return x / 3600
    return x


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for v in result["variants"]:
        r = v["result"]
        row: dict[str, Any] = {"variant": v["name"]}
        for name, keys in COLUMNS:
            row[name] = _value(r, keys)
        for p, c in r["consumers"].items():
            row[f"wait_mean:{p}"] = c["wait"]["mean"]
            row[f"held_mean:{p}"] = c["held_mean"]
        out.append(row)
    return out


def render_sweep(console: Console, result: dict[str, Any]) -> None:
    t = Table(title=f"sweep {escape(result['source'])}: {len(result['variants'])} variants on {result['ran_on']} "
                    f"in {result['wall_seconds']:.1f} s")
    t.add_column("variant")
    for name, _ in COLUMNS:
        t.add_column(name, justify="right")
    paths = sorted({p for v in result["variants"] for p in v["result"]["consumers"]})
    few = paths if len(paths) <= 4 else []
    for p in few:
        t.add_column(f"wait {p}", justify="right")
    for row, v in zip(rows(result), result["variants"], strict=True):
        cells = [f"{row[n]:,.3f}" if isinstance(row[n], float) else f"{row[n]:,}" for n, _ in COLUMNS]
        waits = [f"{v['result']['consumers'][p]['wait']['mean']:,.0f} s" if p in v["result"]["consumers"]
                 else "-" for p in few]
        t.add_row(escape(v["name"]), *cells, *waits)
    print_table(console, t)


def write_sweep(out: Path, result: dict[str, Any]) -> list[Path]:
    import json

    from apportion.simulate.report import _plt

    out.mkdir(parents=True, exist_ok=True)
    files = [out / "sweep.json", out / "sweep.csv"]
    files[0].write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    table = rows(result)
    cols = list(dict.fromkeys(k for r in table for k in r))
    with files[1].open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(table)
    plt = _plt()
    names = [v["name"] for v in result["variants"]]
    fig, axes = plt.subplots(1, 3, figsize=(12, 0.3 * len(names) + 1.5), sharey=True)
    for ax, (label, keys) in zip(axes, (("utilisation", ("utilisation",)), ("Jain's index", ("fairness", "jain")),
                                        ("evictions", ("evictions",))), strict=True):
        ax.barh(range(len(names)), [_value(v["result"], keys) for v in result["variants"]])
        ax.set_title(label)
    axes[0].set_yticks(range(len(names)), names, fontsize=7)
    axes[0].invert_yaxis()
    path = out / "sweep_overall.png"
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    files.append(path)
    paths = sorted({p for v in result["variants"] for p in v["result"]["consumers"]})[:12]
    fig, ax = plt.subplots(figsize=(12, 0.3 * len(names) * max(1, len(paths)) / 2 + 1.5))
    width = 0.8 / max(1, len(paths))
    for k, p in enumerate(paths):
        ax.barh([i + k * width for i in range(len(names))],
                [v["result"]["consumers"].get(p, {}).get("wait", {}).get("mean", 0) / 3600
                 for v in result["variants"]], height=width, label=p)
    ax.set_yticks([i + 0.4 - width / 2 for i in range(len(names))], names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("mean wait, hours")
    ax.legend(fontsize=7)
    path = out / "sweep_waits.png"
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    files.append(path)
    return files
