"""open_trace: the kind from the name, the contents or the directory; the shared real traces."""

from __future__ import annotations

import pytest

from apportion.plan.hostnames import expand_hosts
from apportion.traces import BadLine, detect_kind, generate, open_trace

from .conftest import TRACES, needs_shared, write

SWF_LINE = "1 0 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"


@pytest.mark.parametrize(("name", "text", "kind"), [
    ("a.swf", SWF_LINE, "swf"),
    ("a.swf.gz", SWF_LINE, "swf"),
    ("log.gz", "; Version: 2.2\n" + SWF_LINE, "swf"),      # by contents, gzip
    ("log.txt", "\n" + SWF_LINE, "swf"),
    ("t.jsonl.gz", '{"id": "1", "submit": 0, "run": 1, "slots": 1}\n', "jsonl"),
    ("t.data", '{"id": "1", "submit": 0, "run": 1, "slots": 1}\n', "jsonl"),
    ("pods.csv", "name,cpu_milli,memory_mib\n", "alibaba"),
    ("events.csv", "#header\n0,,1,0,m,0,u,1,9,0.1,0.1,0.1,0\n", "google"),
    ("my_task_events.csv.gz", "", "google"),
])
def test_detects_the_kind(tmp_path, name, text, kind):
    assert detect_kind(write(tmp_path / name, text)) == kind


def test_cannot_tell(tmp_path):
    with pytest.raises(BadLine, match="cannot tell the trace format; give the kind"):
        open_trace(write(tmp_path / "notes.md", "# hello\nworld\n"))
    with pytest.raises(BadLine, match="not a trace directory"):
        open_trace(tmp_path)
    with pytest.raises(ValueError, match="unknown trace kind 'csv'"):
        open_trace(write(tmp_path / "a.swf", SWF_LINE), kind="csv")
    assert open_trace(write(tmp_path / "b.txt", SWF_LINE), kind="swf").kind == "swf"


@needs_shared
def test_nasa_ipsc_reads_fully():
    trace = open_trace(TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz")
    jobs = list(trace.jobs())
    # 18,239 jobs in the file; 173 have run time 0 and are dropped
    assert len(jobs) + trace.dropped["run time unknown or 0"] == 18_239
    assert (trace.info.hosts, trace.info.processors) == (128, 128)
    assert all(1 <= j.slots <= 128 for j in jobs) and jobs[0].submit == 0
    assert all(a.submit <= b.submit for a, b in zip(jobs, jobs[1:], strict=False))
    assert {j.group for j in jobs} == {"1", "2"}


@needs_shared
@pytest.mark.slow
def test_cea_curie_reads_fully_and_generates_one_consumer_per_group():
    trace = open_trace(TRACES / "CEA-Curie-2011-2.1-cln.swf.gz")
    mapping, plan = generate(trace, by="group")
    assert sum(trace.dropped.values()) == 17_286  # run time 0 or unknown
    assert len(mapping.rules) == 304  # 305 groups, but group 326's 5 jobs all ran 0 s
    hosts = [(name, h["slots"]) for h in plan["hosts"] for name in expand_hosts(h["name"])]
    assert len(hosts) == 5544 and sum(slots for _, slots in hosts) == 93_312


@needs_shared
def test_the_other_shared_traces_open():
    google = open_trace(TRACES / "google-task-events-sample.csv")
    assert len(list(google.jobs())) > 0 and google.info.hosts  # the machine events sample beside it
    alibaba = open_trace(TRACES / "alibaba-cluster-trace-gpu-v2023")
    assert (alibaba.info.hosts, alibaba.info.gpus) == (1523, 6212)
    jobs = list(alibaba.jobs())
    assert len(jobs) + alibaba.dropped["never scheduled"] == 8152
    assert {j.resource for j in jobs} == {"cpu", "gpu"}
