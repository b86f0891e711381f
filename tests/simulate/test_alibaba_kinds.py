"""A slice of the Alibaba GPU 2023 trace (openb) replayed by kind on the trace's own 1,523
hosts, its figures checked against counts made here straight from the CSV files, without the
replay's code: when nothing waits, each pod holds its cores, memory and GPUs from its creation
for its run, so each kind's utilisation is the sum of amount x run over (total x makespan), and
a consumer's dominant share over time follows from the same intervals."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from apportion.plan import compile_plan
from apportion.simulate.cluster import cluster_from_info
from apportion.simulate.kindfigures import engine_free, fragmentation_now, workload_mix
from apportion.simulate.replay import Replay
from apportion.traces.alibaba import AlibabaTrace
from tests.simulate.helpers import shared_traces

ALIBABA = shared_traces() / "alibaba-cluster-trace-gpu-v2023"
PODS = ALIBABA / "openb_pod_list_default.csv.gz"
NODES = ALIBABA / "openb_node_list_all_node.csv.gz"
FIRST = 2000  # pods replayed (the first that ran, in creation order)

pytestmark = pytest.mark.skipif(not (PODS.is_file() and NODES.is_file()),
                                reason=f"needs the Alibaba GPU 2023 trace in {ALIBABA} (../shared, not here)")


def _rows(path: Path) -> list[dict[str, str]]:
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def _pods() -> list[tuple[str, float, float, dict[str, float]]]:
    """(qos, start, end, what it holds of each kind) of the first FIRST pods that ran."""
    out = []
    for row in _rows(PODS):
        if not row["scheduled_time"] or not row["deletion_time"]:
            continue
        run = int(row["deletion_time"]) - int(row["scheduled_time"])
        if run <= 0:
            continue
        num, milli = int(row["num_gpu"] or 0), int(row["gpu_milli"] or 0)
        gpus = 0.0 if not num else num * milli / 1000
        created = float(row["creation_time"])
        out.append((row["qos"], created, created + run,
                    {"cores": int(row["cpu_milli"]) / 1000, "memory": int(row["memory_mib"]) / 1024, "gpus": gpus}))
        if len(out) == FIRST:
            break
    return out


def _totals() -> dict[str, float]:
    t = {"cores": 0.0, "memory": 0.0, "gpus": 0.0}
    for row in _rows(NODES):
        t["cores"] += int(row["cpu_milli"]) / 1000
        t["memory"] += int(row["memory_mib"]) / 1024
        t["gpus"] += int(row["gpu"] or 0)
    return t


def _dominant_mean(pods, qos: str, totals: dict[str, float], span: float) -> float:
    """The time integral of max over kinds of held / total, for one qos, over ``span``."""
    events = sorted([(s, +1, p) for q, s, _e, p in pods if q == qos] + [(e, -1, p) for q, _s, e, p in pods if q == qos],
                    key=lambda x: (x[0], x[1]))
    held = dict.fromkeys(totals, 0.0)
    last, area = None, 0.0
    for t, sign, need in events:
        if last is not None:
            area += max(held[k] / totals[k] for k in totals) * (t - last)
        for k in totals:
            held[k] += sign * need[k]
        last = t
    return area / span


def test_a_slice_of_openb_by_kind_matches_a_count_from_the_csv():
    trace = AlibabaTrace(PODS, nodes=NODES)
    cluster = cluster_from_info(trace.info)
    plan = compile_plan({**cluster, "consumers": [{"path": f"/{q}"} for q in ("BE", "Burstable", "Guaranteed", "LS")]})
    assert len(plan.hosts) == 1523 and all(h.resources for h in plan.hosts)
    jobs = [j for _, j in zip(range(FIRST), trace.jobs())]
    mix = workload_mix((j.resources, j.slots) for j in jobs)
    r = Replay(plan, iter(jobs), lambda j: (f"/{j.queue}", None), gpu_mix=mix, progress_every=64)
    seen: list[tuple[float, float]] = []  # (running fragmentation, counted afresh) now and then
    free_of = engine_free(r.engine)
    r.on_progress = lambda _w: seen.append((r.rec.kinds.frag_now / r.rec.kinds.gpu_capacity,
                                            fragmentation_now(plan, free_of, mix)))
    r.run()
    res = r.result()

    pods = _pods()
    totals = _totals()
    assert res["jobs"] == FIRST == len(pods) and res["never_started"] == 0
    assert res["wait"]["max"] == 0.0  # nothing waited: each pod held its kinds from its creation on
    start, end = min(p[1] for p in pods), max(p[2] for p in pods)
    span = end - start
    assert res["makespan"] == span
    k = res["kinds"]
    assert k["totals"] == pytest.approx(totals)
    for kind in totals:
        held = sum(p[3][kind] * (p[2] - p[1]) for p in pods)
        assert k["utilisation"][kind] == pytest.approx(held / (totals[kind] * span), rel=1e-9), kind
    for qos in ("BE", "Burstable", "LS"):
        got = res["consumers"][f"/{qos}"]["kinds"]["dominant_share_mean"]
        assert got == pytest.approx(_dominant_mean(pods, qos, totals, span), rel=1e-9), qos
    # GPU fragmentation: the running value is what a count afresh from the engine's books
    # gives, at every check during the replay and at its end (the cluster empty again)
    assert len(seen) > 10
    for running, fresh in seen:
        assert running == pytest.approx(fresh, abs=1e-9)
    assert r.rec.kinds.frag_now / r.rec.kinds.gpu_capacity == pytest.approx(
        fragmentation_now(plan, free_of, mix), abs=1e-9)
    f = k["gpu_fragmentation"]
    assert 0 < f["mean"] <= f["max"] < 1
