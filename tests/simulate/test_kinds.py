"""A replay on hosts with resources: jobs ask by kind, Dominant Resource Fairness shares the
cluster, and the figures gain each kind's utilisation, each consumer's dominant share and the
GPU fragmentation (FGD's measure), all checked here against counts worked out by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.plan import compile_plan
from apportion.simulate.kindfigures import engine_free, fragmentation_now, task_of, workload_mix
from apportion.simulate.replay import Replay, one_consumer
from apportion.traces.record import TraceJob

runner = CliRunner()


def _plan(hosts: list[dict], consumers: list[str]):
    return compile_plan({
        "hosts": hosts,
        "resource_groups": [{"name": "nodes", "hosts": [h["name"] for h in hosts]}],
        "consumers": [{"path": c, "share_ratio": 1} for c in consumers],
    })


def _job(i: int, submit: float, run: float, user: str, **need: float) -> TraceJob:
    return TraceJob(str(i), submit, run, 1, user=user, resources=tuple(sorted(need.items())))


def _replay(plan, jobs, resolve, mix=None) -> tuple[Replay, dict]:
    r = Replay(plan, jobs, resolve, gpu_mix=mix)
    r.run()
    return r, r.result()


def test_drf_shares_cores_and_memory_as_the_paper_does_and_the_figures_count_it():
    """The example of the DRF paper (Ghodsi et al., NSDI 2011): 9 cores and 18 GB; /A's tasks
    need <1 core, 4 GB>, /B's <3 cores, 1 GB>. DRF runs 3 of /A's and 2 of /B's, both at a
    dominant share of 2/3; /B's third task waits until the first wave ends at 100 s."""
    plan = _plan([{"name": "h1", "resources": {"cores": 9, "memory": 18}}], ["/A", "/B"])
    jobs = [_job(i, 0, 100, "a", cores=1, memory=4) for i in range(3)]
    jobs += [_job(10 + i, 0, 100, "b", cores=3, memory=1) for i in range(3)]
    r, res = _replay(plan, jobs, lambda j: ("/A" if j.user == "a" else "/B", None))
    assert res["jobs"] == 6 and res["never_started"] == 0
    assert res["makespan"] == 200.0
    a, b = res["consumers"]["/A"], res["consumers"]["/B"]
    assert a["wait"]["max"] == 0.0 and b["wait"]["max"] == 100.0  # only /B's third task waited
    k = res["kinds"]
    assert k["totals"] == {"cores": 9.0, "memory": 18.0}
    # cores: 9 held for 100 s, then 3 for 100 s; memory: 12 + 2, then 1
    assert k["utilisation"]["cores"] == pytest.approx((9 * 100 + 3 * 100) / (9 * 200))
    assert k["utilisation"]["memory"] == pytest.approx((14 * 100 + 1 * 100) / (18 * 200))
    assert k["utilisation_max"] == pytest.approx({"cores": 1.0, "memory": 14 / 18})
    assert k["gpu_fragmentation"] is None  # no GPUs here
    # dominant shares: /A 12/18 (memory) for 100 s, then 0; /B 6/9 (cores), then 3/9
    assert a["kinds"]["dominant_share_mean"] == pytest.approx((2 / 3 * 100) / 200)
    assert b["kinds"]["dominant_share_mean"] == pytest.approx((2 / 3 * 100 + 1 / 3 * 100) / 200)
    assert a["kinds"]["dominant_share_max"] == pytest.approx(2 / 3)
    assert b["kinds"]["dominant_share_max"] == pytest.approx(2 / 3)
    assert a["kinds"]["share_mean"] == pytest.approx({"cores": 3 * 100 / (9 * 200), "memory": 12 * 100 / (18 * 200)})
    assert b["kinds"]["used_mean"] == pytest.approx({"cores": (6 * 100 + 3 * 100) / 200,
                                                     "memory": (2 * 100 + 1 * 100) / 200})


def test_gpu_fragmentation_is_fgds_measure_integrated_over_the_run():
    """One host of 2 GPUs. /A holds half a GPU (0-100 s), a whole GPU (0-50 s) and a core
    (0-100 s): the task types are those three, a third each. While all three run, the free
    capacity is GPU 0's 500 thousandths: the whole-GPU type cannot use it (no GPU wholly
    free), nor can the CPU type (it asks for none): 2 x 500 / 3. Once the whole GPU ends,
    1,500 are free: the whole-GPU type cannot use GPU 0's 500, the CPU type any: (500 +
    1500) / 3."""
    plan = _plan([{"name": "g1", "resources": {"cores": 8, "memory": 32, "gpus": 2}}], ["/A"])
    jobs = [_job(1, 0, 100, "a", cores=1, memory=1, gpus=0.5), _job(2, 0, 50, "a", cores=1, memory=1, gpus=1),
            _job(3, 0, 100, "a", cores=1, memory=1)]
    mix = workload_mix((j.resources, j.slots) for j in jobs)
    r, res = _replay(plan, jobs, one_consumer("/A"), mix)
    f = res["kinds"]["gpu_fragmentation"]
    first, then = 2 * 500 / 3, (500 + 1500) / 3
    assert f["mean"] == pytest.approx((first * 50 + then * 50) / 100 / 2000)
    assert f["max"] == pytest.approx(then / 2000)
    assert f["gpus_mean"] == pytest.approx((first * 50 + then * 50) / 100 / 1000)
    assert f["of_free"] == pytest.approx((first * 50 + then * 50) / (500 * 50 + 1500 * 50))
    assert f["at_peak"] == pytest.approx({"time": 0.0, "gpus_allocated": 1.5 / 2, "fragmentation": first / 2000})
    assert f["task_types"] == 3
    assert res["kinds"]["utilisation"]["gpus"] == pytest.approx((1.5 * 50 + 0.5 * 50) / (2 * 100))
    # the running value ends where a count afresh from the engine puts the empty host
    empty = fragmentation_now(plan, engine_free(r.engine), mix)
    assert empty == pytest.approx(1 / 3)  # only the CPU type cannot use the free GPUs
    assert r.rec.kinds.frag_now / 2000 == pytest.approx(empty)


def test_task_of_reads_a_jobs_vector_as_fgd_sees_a_task():
    assert task_of((("cores", 11.0), ("gpus", 1.0), ("memory", 40.0)), 8) == \
        task_of((("cores", 88.0), ("memory", 320.0), ("gpus", 8.0)), 1)
    t = task_of((("cores", 6.0), ("gpus", 0.46), ("memory", 12.0)), 1)
    assert (t.cpu, t.memory, t.num_gpu, t.gpu_milli) == (6000, 12 * 1024, 1, 460)
    assert task_of((("cores", 0.5),), 3).num_gpu == 0


def test_a_plan_of_plain_slots_replays_the_same_jobs_by_slots_without_kinds():
    """Hosts without resources: a job's vector is not asked for (its slots are), and the figures
    have no ``kinds``, as before."""
    from tests.simulate.helpers import plan

    p = plan([{"path": "/A"}], 4)
    _, res = _replay(p, [_job(1, 0, 10, "a", cores=2, memory=1)], one_consumer("/A"))
    assert res["jobs"] == 1 and "kinds" not in res and "kinds" not in res["consumers"]["/A"]


NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,0,\nn1,16000,65536,2,T4\nn2,32000,131072,4,V100\n"
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n"
        "p0,4000,8192,1,500,,LS,Running,0,100,0\n"
        "p1,8000,16384,2,1000,,LS,Running,10,210,10\n"
        "p2,2500,4096,0,0,,BE,Running,20,320,20\n"
        "p3,16000,32768,1,1000,,BE,Running,30,130,30\n"
        "p4,1000,1024,1,1000,,BE,Pending,40,,\n")


def test_alibaba_pods_through_map_and_simulate_by_kind(tmp_path: Path):
    """``simulate map`` writes hosts with resources for an Alibaba trace; the replay asks for
    each pod's cores, memory and GPUs, and the JSON, the CSV files, the summary and the report
    carry the figures by kind."""
    d = tmp_path / "trace"
    d.mkdir()
    (d / "openb_node_list_all_node.csv").write_text(NODES)
    (d / "openb_pod_list_default.csv").write_text(PODS)
    r = runner.invoke(app, ["simulate", "map", str(d), "--by", "queue", "-o", str(tmp_path / "map.yaml"),
                            "--plan-out", str(tmp_path / "plan.yaml")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "plan.yaml").read_text()
    assert '{name: "n0", resources: {cores: 32, memory: 64, gpus: 0}}' in text
    assert '{name: "n2", resources: {cores: 32, memory: 128, gpus: 4}, attributes: {model: "V100"}}' in text
    assert '{name: "nodes", hosts: ["n[0-2]"]}' in text
    out = tmp_path / "out"
    r = runner.invoke(app, ["simulate", str(tmp_path / "plan.yaml"), str(d), "--map", str(tmp_path / "map.yaml"),
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    summary = " ".join(r.output.split())
    assert "by kind: utilisation by kind, allocated over the run: cores" in summary
    assert "GPU fragmentation (FGD's measure" in summary
    res = json.loads((out / "result.json").read_text())
    k = res["kinds"]
    assert k["totals"] == {"cores": 80.0, "gpus": 6.0, "memory": 256.0}
    span = 320.0  # first creation 0, last end 320
    assert res["makespan"] == span and res["never_started"] == 0
    assert k["utilisation"]["gpus"] == pytest.approx((0.5 * 100 + 2 * 200 + 1 * 100) / (6 * span))
    assert k["utilisation"]["cores"] == pytest.approx((4 * 100 + 8 * 200 + 2.5 * 300 + 16 * 100) / (80 * span))
    assert k["utilisation"]["memory"] == pytest.approx((8 * 100 + 16 * 200 + 4 * 300 + 32 * 100) / (256 * span))
    assert set(res["consumers"]) == {"/BE", "/LS"}
    with (out / "consumers.csv").open() as f:
        rows = {row["consumer"]: row for row in csv.DictReader(f)}
    assert float(rows["/LS"]["kinds_dominant_share_mean"]) == pytest.approx(
        res["consumers"]["/LS"]["kinds"]["dominant_share_mean"])
    with (out / "series.csv").open() as f:
        head = next(csv.reader(f))
    assert head[-4:] == ["utilisation:cores", "utilisation:gpus", "utilisation:memory", "gpu_fragmentation"]
    html = (out / "report.html").read_text()
    assert "<b>By kind:</b>" in html and "dominant share (mean)" in html and 'alt="kinds"' in html
