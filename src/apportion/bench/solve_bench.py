"""`apportion bench solve` and `apportion bench ducc --end-to-end`: the whole command, as a
user meets it, from a scenario file on disk to the JSON answer on stdout.

The scenario is written to a file first (``scenario_files``: JSON text in a ``.yaml``
file), then ``apportion solve FILE --json`` runs in a fresh process, ``runs`` times,
its output going to a file; the figure is the median wall time of those runs,
interpreter start-up, imports, reading, checking, the engine, the snapshots and the
JSON writing included. Beside it, the time the ``json`` module takes to read the same
text and write it back (``json.loads`` then ``json.dumps``, in this process, the
median of as many runs): the floor any reader of that file pays, and the ratio between
the two says how far above that floor the whole command is.
"""

from __future__ import annotations

import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from apportion.bench.ducc_bench import DuccBenchSpec
from apportion.bench.engine_bench import MIB
from apportion.bench.machine import source_revision
from apportion.bench.scenario_files import ducc_scenario, ego_scenario, write_json
from apportion.bench.workload import WorkloadSpec

TARGET_EGO_S = 3.0
TARGET_DUCC_S = 2.0


def solve_command() -> list[str]:
    """``apportion`` as installed beside this interpreter, else ``python -m apportion.cli``."""
    script = Path(sys.executable).with_name("apportion")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "apportion.cli"]


def _stats(samples: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "samples": samples}


def json_round_trip(text: str, runs: int) -> dict[str, Any]:
    """``json.loads`` then ``json.dumps`` of ``text``, ``runs`` times."""
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        json.dumps(json.loads(text))
        samples.append(time.perf_counter() - t)
    return _stats(samples)


def _children_peak_rss_mib() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (r if sys.platform == "darwin" else r * 1024) / MIB


def time_solve(path: Path, runs: int, check: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """``apportion solve PATH --json`` in a fresh process, ``runs`` times; ``check`` reads the
    last answer and returns what it found (it raises if the answer is wrong)."""
    out_path = path.with_suffix(".out.json")
    samples = []
    cpu = []  # user + system time of the command: what other load on the machine changes least
    for _ in range(runs):
        with out_path.open("w", encoding="utf-8") as out:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            done = subprocess.run([*solve_command(), "solve", str(path), "--json"], stdout=out,
                                  stderr=subprocess.PIPE, text=True, check=False)
            samples.append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(f"apportion solve exited with {done.returncode}: {done.stderr.strip()}")
    answer = json.loads(out_path.read_text(encoding="utf-8"))
    return {"solve_s": _stats(samples), "cpu_s": _stats(cpu), "output_bytes": out_path.stat().st_size, "answer": check(answer),
            "stderr": done.stderr.strip(), "peak_rss_mib": _children_peak_rss_mib()}


def _measure(mapping: dict[str, Any], name: str, runs: int, target: float, keep: Path | None,
             check: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="apportion-bench-"))
    try:
        path = workdir / name
        text = write_json(mapping, path)
        timed = time_solve(path, runs, check)
        base = json_round_trip(text, runs)
        if keep is not None:
            shutil.copyfile(path, keep)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    median = timed["solve_s"]["median"]
    return {
        "revision": source_revision(whole=True),
        "command": "apportion solve FILE --json",
        "file": {"bytes": len(text.encode()), "lines": text.count("\n") + 1,
                 "kept_as": str(keep) if keep is not None else None},
        "runs": runs,
        **timed,
        "json_round_trip_s": base,
        "ratio_to_json": median / base["median"],
        "target_s": target,
        "met": median <= target,
    }


def _check_ego(answer: dict[str, Any]) -> dict[str, Any]:
    snaps = answer["snapshots"]
    if len(snaps) != 2:
        raise RuntimeError(f"expected a snapshot per step (2), got {len(snaps)}")
    held = [sum(r["held"] for r in s["requests"].values()) for s in snaps]
    return {"snapshots": len(snaps), "held_slots": held, "requests": [len(s["requests"]) for s in snaps],
            "decisions": [s["decisions"] for s in snaps]}


def run_ego(spec: WorkloadSpec, change_fraction: float = 0.01, runs: int = 3,
            keep: Path | None = None) -> dict[str, Any]:
    """The EGO figure: the engine benchmark's cluster and requests as a scenario file,
    plus one step changing ``change_fraction`` of the requests."""
    t = time.perf_counter()
    mapping = ego_scenario(spec, change_fraction)
    generate_s = time.perf_counter() - t
    step = mapping["timeline"][1]
    out = {"spec": {**asdict(spec), "change_fraction": change_fraction}, "generate_s": generate_s,
           "scenario": {"requests": len(mapping["timeline"][0]["requests"]),
                        "consumers": len(mapping["consumers"]),
                        "step_changes": len(step.get("change", {})), "step_releases": len(step.get("release", [])),
                        "step_submits": len(step.get("requests", []))}}
    return {**out, **_measure(mapping, "ego-scenario.yaml", runs, TARGET_EGO_S, keep, _check_ego)}


def _check_ducc(answer: dict[str, Any]) -> dict[str, Any]:
    snaps = answer["snapshots"]
    last = snaps[-1]
    if not last.get("end"):
        raise RuntimeError("the last snapshot is not the end of the run")
    return {"snapshots": len(snaps), "cycles": last["cycle"] + 1, "ended": last["ended"], "at": last["at"],
            "jobs_live": len(last["jobs"]), "processes_held": sum(j["held"] for j in last["jobs"].values())}


def run_ducc(spec: DuccBenchSpec, runs: int = 3, keep: Path | None = None) -> dict[str, Any]:
    """The DUCC figure: the DUCC benchmark's machines and jobs as a DUCC scenario file with a
    ``spec.cycle_s`` clock until ``spec.cycles`` cycles after the first."""
    t = time.perf_counter()
    mapping = ducc_scenario(spec)
    generate_s = time.perf_counter() - t
    out = {"spec": asdict(spec), "generate_s": generate_s,
           "scenario": {"machines": len(mapping["hosts"]), "jobs": sum(len(s["jobs"]) for s in mapping["timeline"]),
                        "cycles": spec.cycles + 1, "cycle_s": spec.cycle_s}}
    return {**out, **_measure(mapping, "ducc-scenario.yaml", runs, TARGET_DUCC_S, keep, _check_ducc)}


def render(console, machine: dict, r: dict) -> None:
    """The figures as a rich table (without --json)."""
    from rich.table import Table
    from apportion.cli.tables import print_table

    rev = r["revision"]
    console.print(f"[bold]machine[/]: {machine['cpu']}, {machine['logical_cpus']} logical CPUs "
                  f"({machine['physical_cores']} cores), {machine['ram_gib']} GiB RAM, {machine['python']}, "
                  f"{machine['platform']}", highlight=False)
    console.print("[bold]source[/]: " + (f"commit {rev['commit']}" + (" with local edits" if rev["source_dirty"]
                                                                         else "")
                                         if rev.get("commit") else "revision unknown"), highlight=False)
    sc, sp = r["scenario"], r["spec"]
    if "requests" in sc:
        console.print(f"[bold]scenario[/]: {sp['hosts']:,} hosts x {sp['slots_per_host']} slots in {sp['groups']} "
                      f"groups, {sc['consumers']:,} consumers ({sp['leaves']:,} leaves), {sc['requests']:,} "
                      f"requests at t = 0, then a step with {sc['step_changes']} changes, {sc['step_releases']} "
                      f"releases and {sc['step_submits']} new requests; seed {sp['seed']}", highlight=False)
    else:
        console.print(f"[bold]scenario[/]: {sc['machines']:,} machines, {sc['jobs']:,} jobs, {sc['cycles']} "
                      f"cycles of {sc['cycle_s']:g}s; seed {sp['seed']}", highlight=False)
    f = r["file"]
    console.print(f"[bold]file[/]: {f['bytes'] / 1e6:,.2f} MB of JSON text, {f['lines']:,} lines"
                  + (f", kept as {f['kept_as']}" if f["kept_as"] else ""), highlight=False)
    t = Table(title=f"{r['command']}, {r['runs']} run(s) in fresh processes")
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_column("target", justify="right")
    t.add_column("")
    s = r["solve_s"]
    t.add_row("end to end, median", f"{s['median']:.3f} s", f"{r['target_s']:.1f} s",
              "[green]met[/]" if r["met"] else "[red]not met[/]")
    t.add_row("  min / max", f"{s['min']:.3f} s / {s['max']:.3f} s", "", "")
    t.add_row("  CPU time (user + system), median", f"{r['cpu_s']['median']:.3f} s", "", "")
    j = r["json_round_trip_s"]
    t.add_row("json.loads + json.dumps of the file, median", f"{j['median'] * 1000:,.1f} ms", "", "")
    t.add_row("ratio, end to end / json", f"{r['ratio_to_json']:,.0f}x", "", "")
    t.add_row("answer", f"{r['output_bytes'] / 1e6:,.2f} MB; " + ", ".join(
        f"{k} {v}" for k, v in r["answer"].items() if k != "decisions"), "", "")
    t.add_row("peak RSS (the command)", f"{r['peak_rss_mib']:,.0f} MiB", "", "")
    print_table(console, t)
