"""The figures tell the truth: what a consumer deserves is integrated exactly between
cycles, jobs that never started count as censored waits, the report never calls a
stranded consumer the one that waits least, and jobs dropped from the trace are counted
with why."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.simulate.figures import Recorder
from apportion.simulate.replay import one_consumer
from apportion.simulate.report import _answers, render_html
from tests.simulate.helpers import job, plan, run


def test_a_lone_tenant_deserves_exactly_what_it_holds():
    """One tenant, 4 slots: busy 0-30 and 100-130, idle between. It deserves the whole
    machine only while it has work, and holds it then: no deviation. (Sampled once a
    minute and held, the idle 70 s counted as deserved: a deviation of 54%.)"""
    p = plan([{"path": "/A"}], 4)
    _, res = run(p, [job(1, 0, 30, 4), job(2, 100, 30, 4)], one_consumer("/A"))
    a = res["consumers"]["/A"]
    assert a["held_mean"] == pytest.approx(4 * 60 / 130)
    assert a["deserved_mean"] == pytest.approx(a["held_mean"])
    assert a["deviation_mean"] == pytest.approx(0.0)
    assert res["fairness"]["max_deviation"] == pytest.approx(0.0)


def _stranded_result() -> dict:
    """/Busy finishes two jobs (waits 0 and 10); /Stuck's only job, submitted at 0, is
    still waiting when the run ends at 100."""
    rec = Recorder(8, ["/Busy", "/Stuck"], {"/Busy": 4, "/Stuck": 4})
    rec.arrive("/Busy", 0, 4)
    rec.arrive("/Stuck", 0, 6)
    rec.start_job("/Busy", 0, 4)
    rec.stop_job("/Busy", 50, 4, requeued=False)
    rec.finish("/Busy", 0, 50, 4, 50)
    rec.arrive("/Busy", 40, 4)
    rec.start_job("/Busy", 50, 4)
    rec.stop_job("/Busy", 100, 4, requeued=False)
    rec.finish("/Busy", 40, 50, 4, 100)
    rec.unfinished("/Stuck", 0, 30, 30, 6)
    return rec.result(until=100)


def test_a_job_that_never_started_counts_as_a_censored_wait():
    res = _stranded_result()
    stuck, busy = res["consumers"]["/Stuck"], res["consumers"]["/Busy"]
    assert (stuck["jobs"], stuck["never_started"], res["never_started"]) == (0, 1, 1)
    assert stuck["wait"]["mean"] == 100.0  # at least the end of the run less its submission
    assert stuck["bounded_slowdown"]["mean"] == pytest.approx((100 + 30) / 30)
    # it would end at 130 at the earliest; alone on its 4 (at least its 6) it spans 30 s
    assert stuck["finish_time_fairness"] == pytest.approx(130 / 30)
    assert busy["wait"]["mean"] == 5.0 and busy["never_started"] == 0
    assert res["wait"]["max"] == 100.0  # the run's own distribution counts it too


def test_the_report_never_calls_a_stranded_consumer_the_one_that_waits_least():
    res = _stranded_result()
    # make the stranded consumer's censored wait the smallest: the report must not name it
    res["consumers"]["/Stuck"]["wait"] = {"mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
    text = " ".join(_answers(res))
    assert "the shortest: /Stuck" not in text
    assert "the shortest: /Busy" in text
    assert "/Stuck (1)" in text  # named among the consumers whose jobs never started
    html = render_html(res, {})
    assert "never started" in html


def _swf(tmp_path, rows: list[str]):
    path = tmp_path / "t.swf"
    path.write_text("; MaxNodes: 4\n; MaxProcs: 4\n" + "\n".join(rows) + "\n")
    return path


def test_dropped_jobs_are_counted_with_why_in_the_json_the_summary_and_the_report(tmp_path):
    rows = ["1 0 -1 10 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1",
            "2 5 -1 0 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1",  # run time 0
            "3 6 -1 -1 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1",  # run time unknown
            "4 7 -1 10 -1 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1",  # no processor count
            "5 8 -1 10 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1"]
    trace = _swf(tmp_path, rows)
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("consumers:\n  - {path: /A}\n")
    r = CliRunner().invoke(app, ["simulate", str(plan_file), str(trace), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["jobs"] == 2
    assert res["dropped"] == {"run time unknown or 0": 2, "no processor count": 1}
    assert res["dropped_jobs"] == 3
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["simulate", str(plan_file), str(trace), "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    needle = "3 jobs of the trace dropped before the replay (2 run time unknown or 0, 1 no processor count)"
    assert "".join(needle.split()) in "".join(r.output.split())
    assert "3 jobs of the trace dropped" in (out / "report.html").read_text()


def test_the_run_ends_with_its_last_job_when_every_job_started():
    # the last job ends at 10.5, between two ticks: the run's end is 10.5, not the tick after
    p = plan([{"path": "/A"}], 4)
    _, res = run(p, [job(1, 0, 10.5, 2)], one_consumer("/A"))
    assert res["makespan"] == 10.5 and res["never_started"] == 0


def test_compare_marks_jobs_that_never_started():
    import copy

    from apportion.simulate.compare import compare

    b = _stranded_result()
    a = copy.deepcopy(b)
    a["never_started"] = 0
    a["consumers"]["/Stuck"]["never_started"] = 0
    got = compare(a, b)
    assert got["overall"]["never_started"]["mark"] == "worse"
    assert got["consumers"]["/Stuck"]["never_started"]["mark"] == "worse"
    assert got["overall"]["wait_mean"]["a"] == got["overall"]["wait_mean"]["b"]


def test_compare_gives_units_and_marks_no_move_below_its_unit():
    """A tenth of a second more waiting is no worse, however small the times; a second is."""
    from apportion.simulate.compare import compare

    def result(wait: float, util: float) -> dict:
        return {"utilisation": util, "wait": {"mean": wait}, "consumers": {"/A": {"wait": {"mean": wait}}}}

    got = compare(result(0.2, 0.5), result(0.1, 0.5004))
    assert got["overall"]["wait_mean"]["unit"] == "s" and got["overall"]["utilisation"]["unit"] == "ratio"
    assert got["overall"]["wait_mean"]["mark"] == "" and got["consumers"]["/A"]["wait_mean"]["mark"] == ""
    assert got["overall"]["utilisation"]["mark"] == ""
    got = compare(result(2.0, 0.5), result(0.5, 0.6))
    assert got["overall"]["wait_mean"]["mark"] == "better" and got["overall"]["utilisation"]["mark"] == "better"
    assert got["marked"] == 3
