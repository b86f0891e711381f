"""A simulation's files: result.json (the JSON contract), consumers.csv (one row per
consumer, the distributions flattened as ``wait_mean``, ``wait_p50``, ...) and
series.csv (utilisation, held and deserved per consumer over time, in equal bins; in a
replay by kind, each kind's utilisation and the GPU fragmentation too)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

DISTS = ("wait", "bounded_slowdown", "slowdown", "turnaround")


def flat_consumer(line: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A consumer's figures as one row: nested names joined by ``_`` (``wait_p95``,
    ``kinds_share_mean_gpus``)."""
    out: dict[str, Any] = {}
    for k, v in line.items():
        if isinstance(v, dict):
            out.update(flat_consumer(v, f"{prefix}{k}_"))
        else:
            out[f"{prefix}{k}"] = v
    return out


def write_json(path: Path, result: dict[str, Any]) -> None:
    path.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def write_consumers_csv(path: Path, result: dict[str, Any]) -> None:
    rows = [{"consumer": p, **flat_consumer(line)} for p, line in result["consumers"].items()]
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols or ["consumer"])
        w.writeheader()
        for r in rows:
            w.writerow(r)


def write_series_csv(path: Path, series: dict[str, Any]) -> None:
    """One row per bin: utilisation, held and deserved per consumer; in a replay by kind,
    then each kind's utilisation (``utilisation:gpus``) and the GPU fragmentation."""
    paths = sorted(series.get("held", {}))
    kinds = series.get("kinds") or {}
    per_kind = kinds.get("utilisation", {})
    frag = kinds.get("gpu_fragmentation")
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["t", "utilisation"] + [f"held:{p}" for p in paths] + [f"deserved:{p}" for p in paths]
                   + [f"utilisation:{k}" for k in per_kind] + (["gpu_fragmentation"] if frag is not None else []))
        for i, t in enumerate(series.get("t", [])):
            w.writerow([f"{t:.3f}", f"{series['utilisation'][i]:.6f}"]
                       + [f"{series['held'][p][i]:.4f}" for p in paths]
                       + [f"{series['deserved'][p][i]:.4f}" for p in paths]
                       + [f"{per_kind[k][i]:.6f}" for k in per_kind]
                       + ([f"{frag[i]:.6f}"] if frag is not None else []))


def write_all(out: Path, result: dict[str, Any], series: dict[str, Any]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "result.json", out / "consumers.csv", out / "series.csv"]
    write_json(files[0], result)
    write_consumers_csv(files[1], result)
    write_series_csv(files[2], series)
    return files
