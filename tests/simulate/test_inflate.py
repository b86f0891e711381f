"""apportion simulate PLAN TRACE --inflate: FGD's inflation experiment on a GPU trace."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.simulate.inflate import parse_percents, read_gpu_trace, stream

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
ALIBABA = next((p for p in (REPO.parent / "shared" / "traces" / "alibaba-cluster-trace-gpu-v2023",
                            REPO.parents[1] / "shared" / "traces" / "alibaba-cluster-trace-gpu-v2023")
                if (p / "openb_pod_list_default.csv.gz").is_file()), None)

NODES = """\
sn,cpu_milli,memory_mib,gpu,model
n0,32000,65536,0,
n1,16000,65536,2,T4
n2,32000,131072,4,V100
n3,96000,393216,8,G2
"""
PODS_HEAD = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
             "scheduled_time\n")
PODS = PODS_HEAD + """\
p0,4000,8192,1,500,,LS,Running,0,100,0
p1,8000,16384,1,1000,,LS,Running,10,200,10
p2,2000,4096,0,0,,BE,Running,20,300,20
p3,4000,8192,2,1000,V100,LS,Running,30,400,30
p4,6000,12288,1,460,,BE,Running,40,500,40
p5,12000,32768,4,1000,,LS,Running,50,600,50
"""
PLAN = """\
consumers:
  - {path: /LS, share_ratio: 1}
  - {path: /BE, share_ratio: 1}
"""
MAP = """\
default: /BE
rules:
  - {queue: "LS", consumer: /LS}
"""


def _files(tmp_path: Path, pods: str = PODS, nodes: str = NODES) -> tuple[Path, Path, Path]:
    d = tmp_path / "trace"
    d.mkdir()
    (d / "openb_node_list_all_node.csv").write_text(nodes)
    (d / "openb_pod_list_default.csv").write_text(pods)
    (tmp_path / "plan.yaml").write_text(PLAN)
    (tmp_path / "map.yaml").write_text(MAP)
    return tmp_path / "plan.yaml", d / "openb_pod_list_default.csv", tmp_path / "map.yaml"


def _inflate(plan: Path, trace: Path, mapping: Path, *extra: str) -> dict:
    r = runner.invoke(app, ["simulate", str(plan), str(trace), "--map", str(mapping), "--json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_parse_percents():
    assert parse_percents("10,20,...,100") == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert parse_percents("25, 50,100") == [25, 50, 100]
    for bad in ("", "0,50", "10,...", "a,b", "50,40,...,10"):
        with pytest.raises(ValueError, match="inflate"):
            parse_percents(bad)


def test_stream_has_every_task_then_draws_until_the_target():
    req = np.array([1000, 500, 0, 2000])
    order = stream(req, 10_000, np.random.default_rng(1))
    assert sorted(set(order.tolist())) == [0, 1, 2, 3] and set(range(4)) <= set(order.tolist())
    total = req[order].sum()
    assert total >= 10_000 and total - req[order].max() < 10_000 + 2000
    assert np.array_equal(order, stream(req, 10_000, np.random.default_rng(1)))   # the seed decides


def test_inflate_on_a_small_trace(tmp_path):
    plan, trace, mapping = _files(tmp_path)
    res = _inflate(plan, trace, mapping, "--inflate", "25,50,...,100", "--seeds", "4")
    assert res["jobs"] > 0                                         # the replay still runs beside it
    steps = res["inflate"]
    assert [s["percent"] for s in steps] == [25, 50, 75, 100]
    for s in steps:
        assert set(s) == {"percent", "gpu_allocation", "gpu_allocation_min", "gpu_allocation_max", "fragmentation"}
        assert 0 <= s["gpu_allocation_min"] <= s["gpu_allocation"] <= s["gpu_allocation_max"] <= 1
        assert 0 <= s["fragmentation"] <= 1
    assert [s["gpu_allocation"] for s in steps] == sorted(s["gpu_allocation"] for s in steps)
    assert res["inflate_run"] | {"wall_seconds": 0, "cpu_seconds": 0} == {
        "policy": "fgd", "seeds": 4, "first_seed": 0, "tasks": 6, "hosts": 4, "gpus": 14,
        "typical_types": 6, "wall_seconds": 0, "cpu_seconds": 0}
    again = _inflate(plan, trace, mapping, "--inflate", "25,50,...,100", "--seeds", "4")
    assert again["inflate"] == steps                                # seeded: the same figures
    other = _inflate(plan, trace, mapping, "--inflate", "100", "--seeds", "2", "--policy", "random")
    assert other["inflate_run"]["policy"] == "random" and len(other["inflate"]) == 1


def test_inflate_refuses_bad_options_and_traces(tmp_path):
    plan, trace, mapping = _files(tmp_path)
    base = ["simulate", str(plan), str(trace), "--map", str(mapping), "--json"]
    r = runner.invoke(app, [*base, "--inflate", "50", "--policy", "worst"])
    assert r.exit_code == 2 and "--policy" in r.output
    r = runner.invoke(app, [*base, "--inflate", "50,x"])
    assert r.exit_code == 2 and "inflate" in r.output and "'x'" in r.output
    swf = tmp_path / "t.swf"
    swf.write_text("; MaxProcs: 4\n1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n")
    r = runner.invoke(app, ["simulate", str(plan), str(swf), "--map", str(mapping), "--json", "--inflate", "50"])
    assert r.exit_code == 2 and "GPU trace" in r.output
    bad = PODS_HEAD + "p0,4000,8192,1,oops,,LS,Running,0,100,0\n"
    (trace.parent / "openb_pod_list_default.csv").write_text(bad)
    with pytest.raises(ValueError, match="gpu_milli"):
        read_gpu_trace(trace)


@pytest.mark.skipif(ALIBABA is None, reason="needs ../shared/traces/alibaba-cluster-trace-gpu-v2023 (not here)")
def test_inflate_on_a_sample_of_the_alibaba_trace(tmp_path):
    """The first 150 GPU hosts and 1,500 pods of the openb trace: when all the GPUs are asked
    for, FGD allocates more than best-fit, and best-fit more than random placement."""
    with gzip.open(ALIBABA / "openb_node_list_all_node.csv.gz", "rt") as f:
        rows = list(csv.reader(f))
    nodes = [rows[0]] + [r for r in rows[1:] if r[3] not in ("", "0")][:150]
    with gzip.open(ALIBABA / "openb_pod_list_default.csv.gz", "rt") as f:
        pods = list(csv.reader(f))[:1501]
    text = lambda rs: "".join(",".join(r) + "\n" for r in rs)  # noqa: E731
    plan, trace, mapping = _files(tmp_path, text(pods), text(nodes))
    figures = {}
    for policy in ("random", "bestfit", "fgd"):
        res = _inflate(plan, trace, mapping, "--inflate", "50,100", "--seeds", "2", "--policy", policy)
        assert res["inflate_run"]["hosts"] == 150
        assert res["inflate"][0]["gpu_allocation"] > 0.45
        figures[policy] = res["inflate"][1]["gpu_allocation"]
    assert figures["fgd"] > figures["bestfit"] > figures["random"]
