"""The baselines (``simulate.baselines``) against AccaSim's FIFO and EASY backfilling,
job by job: the same jobs (as apportion reads them) written as a clean SWF file, run by
AccaSim in its own Python (``accasim_driver.py``), each job's start compared.

    python -m tests.simulate.accasim_compare TRACE [N_JOBS|0 [SQUEEZE]]   # prints the counts

AccaSim's Python: $ACCASIM_PYTHON, else /tmp/accasim-venv/bin/python (a venv with
``pip install accasim``)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from apportion.plan import compile_plan as _compile
from apportion.simulate.baselines import baseline, estimate
from apportion.simulate.replay import one_consumer
from apportion.traces import open_trace

DRIVER = Path(__file__).with_name("accasim_driver.py")


def accasim_python() -> str | None:
    """A Python that imports AccaSim (with the shim), or None."""
    py = os.environ.get("ACCASIM_PYTHON", "/tmp/accasim-venv/bin/python")
    if not Path(py).exists():
        return None
    probe = ("import collections, collections.abc; collections.Mapping = collections.abc.Mapping; "
             "import accasim.base.simulator_class")
    ok = subprocess.run([py, "-c", probe], capture_output=True, timeout=120).returncode == 0
    return py if ok else None


def compare(trace: str | os.PathLike[str], limit: int | None = None, python: str | None = None,
            work: str | None = None, squeeze: int = 1) -> dict[str, dict[str, int]]:
    """{"fcfs": {"jobs", "same", "first_different"...}, "easy": {...}}: per-job starts of
    apportion's baselines against AccaSim's FIFO and EBF on the trace's processors.
    ``squeeze``: submit times divided by this (whole seconds), for a busier machine."""
    py = python or accasim_python()
    if py is None:
        raise RuntimeError("no Python with AccaSim")
    tr = open_trace(trace)
    jobs = list(itertools.islice(tr.jobs(), limit)) if limit else list(tr.jobs())
    if squeeze > 1:
        jobs = [replace(j, submit=float(int(j.submit) // squeeze)) for j in jobs]
    nodes = tr.info.processors or max(j.slots for j in jobs)
    plan = _compile({"hosts": [{"name": "h", "slots": nodes}], "resource_groups": [{"name": "cpu", "hosts": ["h"]}],
                     "consumers": [{"path": "/All"}]})
    out: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="accasim-", dir=work) as where:
        swf = Path(where) / "jobs.swf"
        with swf.open("w") as f:
            for j in jobs:
                f.write(f"{j.id} {int(j.submit)} -1 {int(j.run)} {j.slots} -1 -1 {j.slots} {int(estimate(j))} "
                        f"-1 1 1 1 -1 1 -1 -1 -1\n")
        for ours, theirs in (("fcfs", "fifo"), ("easy", "easy")):
            mine = baseline(ours, plan, iter(jobs), one_consumer("/All"), keep_starts=True).starts
            run = subprocess.run([py, str(DRIVER), str(swf), str(nodes), theirs, str(Path(where) / theirs)],
                                 capture_output=True, text=True, timeout=3000)
            if run.returncode != 0:
                raise RuntimeError(f"AccaSim failed: {run.stderr[-2000:]}")
            acc = {k: float(v) for k, v in json.loads(run.stdout).items()}
            same = [k for k in mine if k in acc and acc[k] == mine[k]]
            diff = [k for k in mine if k not in acc or acc[k] != mine[k]]
            out[ours] = {"jobs": len(mine), "mine": mine, "accasim_jobs": len(acc), "same": len(same),
                         "different": len(diff), "first_different": diff[0] if diff else None,
                         "first_different_starts": (mine[diff[0]], acc.get(diff[0])) if diff else None}
    return out


if __name__ == "__main__":
    got = compare(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "0" else None,
                  squeeze=int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    for v in got.values():
        v.pop("mine")
    print(json.dumps(got, indent=1))
