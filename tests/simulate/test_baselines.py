"""The plain batch schedulers beside a plan (--baseline fcfs|easy): worked by hand, on
the command line, and job by job against AccaSim, an independent simulator."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.simulate.baselines import baseline
from apportion.simulate.replay import one_consumer
from apportion.traces import open_trace
from apportion.traces.record import TraceJob
from tests.simulate.helpers import job, plan, shared_traces

NASA = shared_traces() / "NASA-iPSC-1993-3.1-cln.swf.gz"


def _starts(name: str, jobs: list[TraceJob], slots: int = 4) -> dict[str, float]:
    b = baseline(name, plan([{"path": "/A"}], slots), jobs, one_consumer("/A"), keep_starts=True)
    assert b.starts is not None
    return b.starts


def test_easy_backfills_a_job_that_ends_before_the_heads_reservation():
    # 4 slots. j1 (2 slots, 10 s) runs from 0; j2 wants 4: reserved at 10, when j1 ends.
    # j3 (2 slots, 5 s) at 2 ends at 7, before 10: EASY starts it at once; FCFS keeps it
    # behind j2 (10 -> 15). j4 (1 slot, 20 s) would end after 10 and the reservation needs
    # every slot: it waits for j2 in both.
    jobs = [job(1, 0, 10, 2), job(2, 1, 5, 4), job(3, 2, 5, 2), job(4, 3, 20, 1)]
    assert _starts("fcfs", jobs) == {"1": 0, "2": 10, "3": 15, "4": 15}
    assert _starts("easy", jobs) == {"1": 0, "2": 10, "3": 2, "4": 15}


def test_easy_plans_with_the_requested_time_not_the_run_time():
    # j3 runs 5 s but asked for 50: by its estimate it would end after the reservation
    jobs = [job(1, 0, 10, 2), job(2, 1, 5, 4), TraceJob("3", 2, 5, 2, walltime=50)]
    assert _starts("easy", jobs)["3"] == 15


def test_easy_backfills_a_long_job_on_slots_the_reservation_does_not_need():
    # 4 slots. j1 (3 slots, 10 s) from 0; j2 (2 slots) reserved at 10, when 4 are free: 2
    # spare then. j3 (1 slot, 100 s) may run on one of them from now; j4 (1 slot, 100 s)
    # at 3 finds no free slot, then at 10 none left beside j2 and j3 but one: starts at 10
    jobs = [job(1, 0, 10, 3), job(2, 1, 5, 2), job(3, 2, 100, 1)]
    assert _starts("easy", jobs) == {"1": 0, "2": 10, "3": 2}
    assert _starts("fcfs", jobs) == {"1": 0, "2": 10, "3": 10}
    # two spare slots at the reservation, three one-slot jobs: the third waits
    jobs = [job(1, 0, 10, 2), job(2, 1, 5, 2), job(3, 2, 5, 4)]  # j2 starts at 1 (2 free)
    jobs = [job(1, 0, 10, 3), job(2, 1, 5, 3), job(3, 2, 100, 1), job(4, 2, 100, 1)]
    s = _starts("easy", jobs)
    assert s["3"] == 2  # 1 spare slot at 10 (4 free - 3): j3 takes it
    assert s["4"] == 15  # none left: after j2 (10-15)


def test_the_baselines_beside_the_plan_on_the_command_line(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxNodes: 4\n; MaxProcs: 4\n" + "\n".join(
        f"{i} {s} -1 {r} {n} -1 -1 {n} -1 -1 1 1 1 -1 1 -1 -1 -1"
        for i, (s, r, n) in enumerate([(0, 10, 2), (1, 5, 4), (2, 5, 2), (3, 20, 1)], 1)) + "\n")
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("consumers:\n  - {path: /A}\n")
    r = CliRunner().invoke(app, ["simulate", str(plan_file), str(trace), "--baseline", "fcfs", "--baseline", "easy",
                                 "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    fcfs, easy = res["baselines"]["fcfs"], res["baselines"]["easy"]
    # waits: fcfs 0, 9, 13, 12; easy 0, 9, 0, 12
    assert fcfs["wait"]["mean"] == pytest.approx(34 / 4)
    assert easy["wait"]["mean"] == pytest.approx(21 / 4)
    assert fcfs["jobs"] == easy["jobs"] == res["jobs"] == 4
    assert fcfs["consumers"]["/A"]["jobs"] == 4 and easy["fairness"] is None
    r = CliRunner().invoke(app, ["simulate", str(plan_file), str(trace), "--baseline", "easy", "--no-progress",
                                 "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "plain batch schedulers" in r.output and "easy" in r.output
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<th>scheduler</th>" in html and "<td>easy</td>" in html
    assert json.loads((tmp_path / "out" / "result.json").read_text())["baselines"]["easy"]["jobs"] == 4
    r = CliRunner().invoke(app, ["simulate", str(plan_file), str(trace), "--baseline", "sjf"])
    assert r.exit_code == 2 and "unknown scheduler 'sjf'; known: fcfs, easy" in r.output


def test_both_baselines_start_every_nasa_job_when_accasim_does():
    """apportion's FCFS and EASY against AccaSim's FIFO and EASY backfilling (EBF), run
    live here on the first 7,000 jobs of NASA iPSC (128 one-core nodes): every job starts
    at the same second, the five that EASY starts earlier than FCFS included. AccaSim runs
    in a Python of its own ($ACCASIM_PYTHON, else
    /tmp/accasim-venv/bin/python, with `pip install accasim`)."""
    from tests.simulate.accasim_compare import accasim_python, compare

    if not NASA.exists():
        pytest.skip(f"{NASA} is not here")
    py = accasim_python()
    if py is None:
        pytest.skip("no Python with AccaSim: python3.11 -m venv /tmp/accasim-venv && "
                    "/tmp/accasim-venv/bin/pip install accasim (or set ACCASIM_PYTHON)")
    got = compare(NASA, 7000, py)
    for name in ("fcfs", "easy"):
        assert got[name]["jobs"] == got[name]["accasim_jobs"] == 7000, {k: v["first_different"] for k, v in got.items()}
        assert got[name]["same"] == 7000, {k: v["first_different_starts"] for k, v in got.items()}
    # the comparison means something: on these jobs EASY starts some earlier than FCFS
    fcfs, easy = got["fcfs"]["mine"], got["easy"]["mine"]
    assert sum(easy[k] < fcfs[k] for k in fcfs) >= 5


def test_easy_never_delays_the_head_past_its_reservation_on_a_busy_machine():
    """NASA iPSC's first 3,000 jobs, submitted 8 times as fast (a queue most of the time):
    with exact estimates, every job that headed the queue starts at or before the planned
    start its first reservation gave it, and EASY starts jobs earlier than FCFS."""
    if not NASA.exists():
        pytest.skip(f"{NASA} is not here")
    jobs = [replace(j, submit=float(int(j.submit) // 8)) for j in itertools.islice(open_trace(NASA).jobs(), 3000)]
    b = baseline("easy", plan([{"path": "/A"}], 128), jobs, one_consumer("/A"), keep_starts=True)
    assert b.reserved and b.starts
    late = {k: (b.starts[k], r) for k, r in b.reserved.items() if b.starts[k] > r}
    assert not late
    assert len(b.reserved) > 100
    fcfs = _starts("fcfs", jobs, 128)
    assert sum(b.starts[k] < fcfs[k] for k in fcfs) > 1000
    assert b.result["wait"]["mean"] < 0.5 * baseline("fcfs", plan([{"path": "/A"}], 128), jobs,
                                                     one_consumer("/A")).result["wait"]["mean"]


def test_swf_requested_time_is_the_walltime_easy_plans_with(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text("1 0 -1 10 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1\n"
                    "2 1 -1 5 4 -1 -1 4 3600 -1 1 1 1 -1 1 -1 -1 -1\n"
                    "3 2 -1 5 2 -1 -1 2 50 -1 1 1 1 -1 1 -1 -1 -1\n")
    jobs = list(open_trace(path).jobs())
    assert [j.walltime for j in jobs] == [None, 3600.0, 50.0]
    assert _starts("easy", jobs)["3"] == 15  # asked for 50 s: would end after the reservation at 10
