"""The Google 2011 task events reader on small traces written here."""

from __future__ import annotations

import pytest

from apportion.traces import TraceJob, open_trace
from apportion.traces.google import GoogleTrace

from .conftest import assert_one_bad_line, write

S = 1_000_000  # microseconds
W = 600 * S  # the window starts at 600 s


def event(t, job, task, kind, user="u1", cls=1, prio=9, cpu="0.0625"):
    return f"{t},,{job},{task},m1,{kind},{user},{cls},{prio},{cpu},0.01,0.001,0\n"


def test_runs_submit_order_and_fields(tmp_path):
    text = (
        "#Time stamp,Missing info,jobID,Task index,...\n"
        + event(0, 1, 0, 0) + event(0, 1, 0, 1)               # running at the trace start
        + event(W + 10 * S, 2, 0, 0, user="u2", prio=0, cpu="0.005")
        + event(W + 12 * S, 2, 0, 1, user="u2", prio=0, cpu="0.005")
        + event(W + 20 * S, 3, 0, 0, prio=4, cls=2)            # submitted, evicted, scheduled again
        + event(W + 21 * S, 3, 0, 1)
        + event(W + 25 * S, 3, 0, 2)
        + event(W + 26 * S, 3, 0, 0, cpu="")
        + event(W + 30 * S, 3, 0, 1, cpu="")
        + event(W + 40 * S, 2, 0, 4)                           # job 2 finishes first ...
        + event(W + 50 * S, 3, 0, 4)
        + event(W + 55 * S, 4, 0, 0) + event(W + 56 * S, 4, 0, 5)  # killed while pending: dropped
        + event(W + 60 * S, 2, 0, 0) + event(W + 61 * S, 2, 0, 1) + event(W + 62 * S, 2, 0, 3)  # run 2
        + event(W + 70 * S, 5, 0, 0)                           # never scheduled
        + event(W + 100 * S, 1, 0, 4)                          # ... the task running from the start last
    )
    path = write(tmp_path / "task_events.csv.gz", text)
    trace = open_trace(path)
    assert isinstance(trace, GoogleTrace)
    jobs = list(trace.jobs())
    assert jobs == [
        # running before the window: its run counts from the window's start; 0.0625 x 100 -> 7 slots
        TraceJob("1.0", 0.0, 100.0, 7, "u1", "production", "9", "1"),
        TraceJob("2.0", 10.0, 28.0, 1, "u2", "free", "0", "1"),  # 0.005 x 100 -> 1 slot
        TraceJob("3.0", 20.0, 20.0, 7, "u1", "batch", "4", "2"),  # from the last SCHEDULE (30 s) to 50 s
        TraceJob("2.0#2", 60.0, 1.0, 7, "u1", "production", "9", "1"),
    ]
    assert trace.dropped == {"ended before it ran": 1, "never ran in the trace": 1}
    assert trace.cut == 0


def test_a_task_running_at_the_end_is_cut_there(tmp_path):
    path = write(tmp_path / "t.csv", event(W, 1, 0, 0) + event(W + S, 1, 0, 1) + event(W + 9 * S, 2, 0, 0))
    trace = GoogleTrace(path)
    assert [(j.id, j.run) for j in trace.jobs()] == [("1.0", 8.0)]
    assert trace.cut == 1


def test_cpu_slots_and_users_from_job_events(tmp_path):
    tasks = write(tmp_path / "tasks.csv", event(W, 7, 0, 1, user="", cpu="0.25") + event(W + S, 7, 0, 4, user=""))
    jobs = write(tmp_path / "jobs.csv", f"{W},,7,0,alice,1,name,logical\n")
    trace = GoogleTrace(tasks, cpu_slots=32, job_events=jobs)
    assert [(j.user, j.slots) for j in trace.jobs()] == [("alice", 8)]


def test_directory_of_shards_and_machines(tmp_path):
    (tmp_path / "task_events").mkdir()
    (tmp_path / "machine_events").mkdir()
    write(tmp_path / "task_events" / "part-00000-of-00500.csv.gz", event(W, 1, 0, 1))
    write(tmp_path / "task_events" / "part-00001-of-00500.csv.gz", event(W + 5 * S, 1, 0, 4))
    write(tmp_path / "machine_events" / "part-00000-of-00001.csv.gz",
          "0,10,0,p1,0.5,0.25\n0,11,0,p1,1,0.5\n5,10,2,p1,0.25,0.25\n")
    trace = open_trace(tmp_path)
    assert [(j.id, j.run) for j in trace.jobs()] == [("1.0", 5.0)]
    assert trace.info.hosts == 2 and trace.info.processors == 125  # 0.25 x 100 + 1 x 100


@pytest.mark.parametrize(("line", "field", "reason"), [
    ("1,2,3\n", "line", "3 fields; a task event has 13"),
    (event("soon", 1, 0, 0), "time", "'soon' is not a whole number of microseconds"),
    (event(W, 1, 0, "x"), "event type", "'x' is not a whole number"),
    (event(W, 1, 0, 9), "event type", "9 is not one of 0-8"),
    (event(W, 1, 0, 0, cpu="lots"), "CPU request", "'lots' is not a number"),
    (event(W, 1, 0, 0, cpu="2"), "CPU request", "2 is not between 0 and 1 (normalized)"),
    (event(W - S, 1, 0, 0), "time", "599000000 is before the previous event's 600000000"),
])
def test_bad_lines(tmp_path, line, field, reason):
    assert_one_bad_line(write(tmp_path / "task_events.csv", event(W, 9, 0, 0) + line), 2, field, reason)
