"""DUCC test workloads as a trace, read through apportion solve's importer."""

from __future__ import annotations

import pytest

from apportion.traces import BadLine, DuccWork, Machine, open_trace
from apportion.traces.ducc import DuccTrace

from .conftest import TRACES, needs_shared


def _workload(tmp_path, jobs: dict[str, str], prepare: str = "compression = 2\nrewrite = false\n"):
    base = tmp_path / "wl"
    (base / "jobs.in").mkdir(parents=True)
    (base / "jobs.prepare").write_text(prepare)
    for name, text in jobs.items():
        (base / "jobs.in" / f"{name}.job").write_text(text)
    return base


def test_jobs_become_elastic_work(tmp_path):
    base = _workload(tmp_path, {
        "w-1": "tod = 4000\nelapsed = 2000 6000 4000\nthreads = 2\nuser = ann\nmemory = 28\nclass = high\n",
        "w-2": "tod = 0\nelapsed = 1000\nthreads = 4\nuser = bob\nmemory = 15\nmachines = 3\n",
    })
    (tmp_path / "t.nodes").write_text("nodes = a b\nmemory = 31 47\na.31 = 1\nb.47 = 2\n")
    trace = open_trace(base)
    assert isinstance(trace, DuccTrace)
    jobs = list(trace.jobs())
    assert [j.id for j in jobs] == ["w-2", "w-1"]  # submit order
    second = jobs[1]
    # tod / compression: 4000 ms / 2 = 2 s; items of (2000 + 6000 + 4000) / 3 / 2 = 2 s each
    assert (second.submit, second.user, second.queue, second.slots, second.memory) == (2.0, "ann", "high", 1, 28.0)
    assert second.ducc == DuccWork(28.0, 2, 3, 2.0, "high", None)
    assert second.run == 4.0  # ceil(3 items / 2 threads) x 2 s
    assert jobs[0].ducc == DuccWork(15.0, 4, 1, 0.5, "", 3)
    # the node file found beside the workload: 1 x 31 GB on a, 2 x 47 GB on b
    assert trace.info.machines == (Machine("a-1", 0, 0, 31.0), Machine("b-2", 0, 0, 47.0), Machine("b-3", 0, 0, 47.0))


def test_bad_job_file_names_file_line_and_field_and_can_be_skipped(tmp_path):
    base = _workload(tmp_path, {
        "w-1": "tod = 0\nelapsed = 1000\nthreads = 2\nuser = ann\nmemory = 28\n",
        "w-2": "tod = 0\nelapsed = soon\nthreads = 4\nuser = bob\nmemory = 15\n",
    })
    with pytest.raises(BadLine) as caught:
        list(DuccTrace(base).jobs())
    bad = caught.value
    assert (bad.file, bad.line, bad.field) == (str(base / "jobs.in" / "w-2.job"), 2, "elapsed")
    trace = DuccTrace(base, skip_bad=1)
    assert [j.id for j in trace.jobs()] == ["w-1"] and trace.skips.skipped == 1


def test_not_a_workload(tmp_path):
    with pytest.raises(BadLine, match="no jobs.in/ directory"):
        DuccTrace(tmp_path)


@needs_shared
def test_mega_15_min_on_the_52_node_cluster():
    trace = open_trace(TRACES / "ducc" / "mega-15-min")
    jobs = list(trace.jobs())
    assert len(jobs) == 32 and all(j.ducc is not None for j in jobs)
    assert trace.info.hosts == 53  # 29 x 31 GB, 20 x 47 GB, 4 x 79 GB
    assert sum(m.memory for m in trace.info.machines) == 29 * 31 + 20 * 47 + 4 * 79
    assert jobs[-1].submit == 920.0  # spread over submission.spread seconds
