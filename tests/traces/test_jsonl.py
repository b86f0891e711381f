"""apportion's JSONL traces: write, read back, bad lines, the header."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apportion.traces import BadLine, DuccWork, Machine, TraceInfo, TraceJob, open_trace, write_jsonl
from apportion.traces.jsonl import JsonlTrace

from .conftest import assert_one_bad_line, write

JOBS = [
    TraceJob("1", 0.0, 1451.0, 128, "1", "1"),
    TraceJob("g7", 3.5, 60.0, 2, queue="LS", resource="gpu", memory=16.0, checkpoint=600.0),
    TraceJob("mega-3", 12.0, 400.0, 1, "Hilaria", queue="normal", memory=28.0,
             ducc=DuccWork(28.0, 4, 100, 4.0, "normal", 94)),
]
INFO = TraceInfo("jsonl", "", hosts=4, slots_per_host=32, processors=128, gpus=8,
                 machines=(Machine("h1", 32, 8, 256.0, "V100"),), queues={"1": "batch"}, jobs=3)


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_write_and_read_back(tmp_path, name):
    path = tmp_path / name
    assert write_jsonl(path, JOBS, INFO) == 3
    trace = open_trace(path)
    assert isinstance(trace, JsonlTrace)
    assert list(trace.jobs()) == JOBS
    assert trace.info == TraceInfo("jsonl", str(path), **{k: getattr(INFO, k) for k in (
        "hosts", "slots_per_host", "processors", "gpus", "machines", "queues", "jobs")})


def test_written_lines_leave_defaults_out(tmp_path):
    path = tmp_path / "t.jsonl"
    write_jsonl(path, JOBS[:1])
    assert path.read_text() == '{"id":"1","submit":0,"run":1451,"slots":128,"user":"1","group":"1"}\n'


BAD = [
    ('{"id": "1", "submit": 0, "run": 5}', "slots", "is required"),
    ('{"id": "1", "submit": 0, "run": 5, "slots": 2, "color": "red"}', "color", "unknown field; known: "),
    ('{"id": "1", "submit": 0, "run": 0, "slots": 2}', "run", "must be above 0 (got 0)"),
    ('{"id": "1", "submit": -1, "run": 5, "slots": 2}', "submit", "must be 0 or more (got -1)"),
    ('{"id": "1", "submit": 0, "run": 5, "slots": 1.5}', "slots", "1.5 is not a whole number"),
    ('{"id": "1", "submit": 0, "run": 5, "slots": true}', "slots", "True is not a whole number"),
    ('{"id": "1", "submit": 0, "run": 5, "slots": 2, "resource": "tpu"}', "resource", "'tpu' is not one of cpu, gpu"),
    ('{"id": "1", "submit": 0, "run": 5, "slots": 2, "user": [1]}', "user", "[1] is not a string"),
    ('{"id": "1", "submit": 0, "run": 5, "slots": 2, "ducc": {"memory": 8, "threads": 2, "items": 3}}',
     "ducc.item_seconds", "is required"),
    ('{"id": "1", "submit": 0, "run": 5, "slots": 2, "ducc": {"memory": 8, "threads": 0, "items": 3, '
     '"item_seconds": 1}}', "ducc.threads", "must be at least 1 (got 0)"),
    ('{"id": "1", "submit": "soon", "run": 5, "slots": 2}', "submit", "'soon' is not a number"),
    ('[1, 2]', "line", "a job line must be a JSON object"),
    ('{"id": "1", ', "line", "not JSON: "),
    ('{"id": "1", "submit": 0.5, "run": 5, "slots": 2}', "submit", "0.5 is before the previous job's 1"),
]


@pytest.mark.parametrize(("line", "field", "reason"), BAD)
def test_bad_lines(tmp_path, line, field, reason):
    path = write(tmp_path / "t.jsonl", '{"id": "0", "submit": 1, "run": 5, "slots": 2}\n\n' + line + "\n")
    assert_one_bad_line(path, 3, field, reason, kept=["0"])


def test_bad_header(tmp_path):
    path = write(tmp_path / "t.jsonl", '{"info": {"hosts": -2}}\n{"id": "0", "submit": 1, "run": 5, "slots": 2}\n')
    with pytest.raises(BadLine, match=r"t.jsonl:1: info.hosts: must be at least 0"):
        open_trace(path)
    trace = open_trace(path, skip_bad=1)
    assert [j.id for j in trace.jobs()] == ["0"] and trace.skips.skipped == 1


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
jobs = st.builds(
    TraceJob, id=names, submit=st.just(0.0), run=st.floats(0.001, 1e9), slots=st.integers(1, 10**6),
    user=names, group=names, queue=names, partition=names, resource=st.sampled_from(["cpu", "gpu"]),
    memory=st.none() | st.floats(0.001, 1e6), checkpoint=st.none() | st.floats(0.001, 1e6),
)


@given(st.lists(jobs, max_size=5))
def test_any_job_survives_the_round_trip(tmp_path_factory, batch):
    path = tmp_path_factory.mktemp("rt") / "t.jsonl"
    write_jsonl(path, batch)
    assert list(open_trace(path).jobs()) == batch
    for line in path.read_text(encoding="utf-8").split("\n")[:-1]:
        json.loads(line)  # each line is one JSON object


def test_resources_by_kind_are_written_and_read_back(tmp_path):
    """What each slot needs of each kind (an Alibaba pod's) goes out as an object and comes back
    as the job had it; an empty or negative vector is a bad line naming the field."""
    job = TraceJob("p1", 5.0, 895.0, 1, queue="LS", resource="gpu", memory=12.0,
                   resources=(("cores", 6.0), ("gpus", 0.46), ("memory", 12.0)))
    info = TraceInfo("jsonl", "", machines=(Machine("n1", 7, 2, 64.0, "T4", cores=7.5),))
    path = tmp_path / "t.jsonl"
    write_jsonl(path, [job], info)
    assert '"resources":{"cores":6.0,"gpus":0.46,"memory":12.0}' in path.read_text()
    trace = open_trace(path)
    assert list(trace.jobs()) == [job]
    assert trace.info.machines == info.machines
    head = '{"id": "1", "submit": 0, "run": 5, "slots": 1, "resources": '
    assert_one_bad_line(write(tmp_path / "a.jsonl", head + "{}}\n" + head + '{"cores": 1}}\n'), 1, "resources",
                        "must be an object of kind", kept=["1"])
    assert_one_bad_line(write(tmp_path / "b.jsonl", head + '{"cores": 1}}\n' + head + '{"cores": -1}}\n'), 2,
                        "resources.cores", "must be 0 or more", kept=["1"])
