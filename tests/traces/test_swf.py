"""The SWF reader on small traces written here (plain and gzip), bad lines, --skip-bad."""

from __future__ import annotations

import pytest

from apportion.traces import BadLine, TraceJob, open_trace
from apportion.traces.swf import SwfTrace

from .conftest import write

HEADER = """; Version: 2.2
; Computer: Test box
; UnixStartTime: 1000
; MaxJobs: 4
; MaxNodes: 4
; MaxProcs: 16
; Queue: 0 interactive
; Queue: 1 batch
; Partition: 1 short
;
"""
#        id submit wait run alloc cpu mem req reqtime reqmem status user group exe queue part prec think
JOBS = """   1   100   -1   50    4   -1  -1   4   -1   2048  1   12   3  -1  1  1 -1 -1
   2   110   -1   30   -1   -1  -1   2   -1   -1    1   7   -1  -1  0 -1 -1 -1
   3   120   -1   -1    8   -1  -1   8   -1   -1    5   12   3  -1  1  1 -1 -1
   4   130   -1   20    2   -1  1024 2   -1   -1    1   12   4  -1  1  1 -1 -1
"""


@pytest.mark.parametrize("name", ["t.swf", "t.swf.gz"])
def test_reads_jobs_header_and_drops(tmp_path, name):
    path = write(tmp_path / name, HEADER + JOBS)
    trace = open_trace(path)
    assert isinstance(trace, SwfTrace)
    info = trace.info
    assert (info.kind, info.hosts, info.processors, info.slots_per_host, info.jobs) == ("swf", 4, 16, 4, 4)
    assert info.queues == {"0": "interactive", "1": "batch"} and info.partitions == {"1": "short"}
    assert info.start == 1000 and info.notes["Computer"] == "Test box"
    jobs = list(trace.jobs())
    assert jobs == [
        TraceJob("1", 0.0, 50.0, 4, "12", "3", "1", "1", "cpu", 2048 / 1024 / 1024),
        # allocated unknown: the requested processors; unknown group and partition: ""
        TraceJob("2", 10.0, 30.0, 2, "7", "", "0", "", "cpu", None),
        # job 3 (run time unknown) is dropped; job 4's memory is the used memory (field 7)
        TraceJob("4", 30.0, 20.0, 2, "12", "4", "1", "1", "cpu", 1024 / 1024 / 1024),
    ]
    assert trace.dropped == {"run time unknown or 0": 1}
    assert trace.origin == 100
    assert list(trace.jobs()) == jobs and trace.dropped == {"run time unknown or 0": 1}  # again, same


def test_slots_fall_back_and_no_processors_dropped(tmp_path):
    path = write(tmp_path / "t.swf", "1 0 -1 10 0 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
                                     "2 5 -1 10 3.0 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    trace = open_trace(path)
    assert [(j.id, j.slots) for j in trace.jobs()] == [("2", 3)]  # "3.0" read as 3
    assert trace.dropped == {"no processor count": 1}


BAD = [
    ("1 0 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1\n", "line", "17 fields; an SWF job line has 18"),
    ("1 x -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", "submit", "'x' is not a number"),
    ("1 0 -1 ten 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", "run", "'ten' is not a number"),
    ("1 0 -1 10 4.5 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", "allocated processors", "'4.5' is not a whole number"),
    ("1 0 -1 10 -1 -1 -1 many -1 -1 1 1 1 -1 -1 -1 -1 -1\n", "requested processors", "'many' is not a whole number"),
    ("1 -1 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", "submit", "unknown submit time (-1)"),
]


@pytest.mark.parametrize(("line", "field", "reason"), BAD)
def test_bad_line_names_file_line_and_field(tmp_path, line, field, reason):
    path = write(tmp_path / "bad.swf.gz", HEADER + "5 0 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n" + line)
    trace = open_trace(path)
    with pytest.raises(BadLine) as caught:
        list(trace.jobs())
    bad = caught.value
    assert (bad.file, bad.line, bad.field, bad.reason) == (str(path), HEADER.count("\n") + 2, field, reason)
    assert str(bad) == f"{path}:{HEADER.count(chr(10)) + 2}: {field}: {reason}"


def test_submit_going_back_is_a_bad_line(tmp_path):
    path = write(tmp_path / "t.swf", "1 50 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
                                     "2 40 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.raises(BadLine, match=r"t.swf:2: submit: 40 is before the previous job's 50"):
        list(open_trace(path).jobs())


def test_skip_bad_counts_and_stops_past_the_limit(tmp_path):
    good = "{id} {t} -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
    text = good.format(id=1, t=0) + "junk\n" + good.format(id=2, t=1) + "1 2 3\n" + good.format(id=3, t=2) + "x\n"
    path = write(tmp_path / "t.swf", text)
    with pytest.raises(BadLine) as caught:
        list(SwfTrace(path, skip_bad=2).jobs())
    assert caught.value.line == 6  # the third bad line stops the reading
    trace = SwfTrace(path, skip_bad=3)
    assert [j.id for j in trace.jobs()] == ["1", "2", "3"]
    assert trace.skips.skipped == 3
    assert [(b.line, b.field) for b in trace.skips.first] == [(2, "line"), (4, "line"), (6, "line")]
    with pytest.raises(BadLine):  # no skipping by default
        list(SwfTrace(path).jobs())


def test_unreadable_file_is_a_bad_line(tmp_path):
    with pytest.raises(BadLine, match="no such file"):
        open_trace(tmp_path / "missing.swf")
    trace = SwfTrace.__new__(SwfTrace)  # a file that goes away after opening
    path = write(tmp_path / "gone.swf", "1 0 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    trace.__init__(path)
    path.unlink()
    with pytest.raises(BadLine, match="gone.swf: file: cannot read"):
        list(trace.jobs())


def test_corrupt_gzip_is_a_bad_line(tmp_path):
    path = write(tmp_path / "t.swf.gz", HEADER + JOBS * 50)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut short
    with pytest.raises(BadLine, match="file: cannot read on"):
        list(SwfTrace(path).jobs())
