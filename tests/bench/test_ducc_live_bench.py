"""`apportion bench ducc-live`: its store checks on crafted stores (they must catch a machine
above its order and an item not done), the reduced cluster, and one short real run (a master,
agents and job processes on a few jobs of mega-15-min) whose own checks pass."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, insert
from typer.testing import CliRunner

from apportion.bench.ducc_live_bench import DuccLiveSpec, check_store, read_cluster, read_jobs
from apportion.cli.main import app
from apportion.service.store.models import Base, CycleRow, HostRow, ItemRow, JobRow, ShareRow

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces" / "ducc"
needs_traces = pytest.mark.skipif(
    not (TRACES / "mega-15-min").is_dir() or not (TRACES / "52.simulated.nodes").is_file(),
    reason=f"{TRACES} is absent: the DUCC traces live in ../shared beside the repository, "
    "which a user's clone does not have")


def crafted_store(tmp_path: Path, shares: list[tuple], items: list[tuple]) -> str:
    """Host h of 47 GB (order 3 at 15 GB); job 1; cycles 1-5; ``shares``: (id, order, cycle,
    gone_cycle); ``items``: (idx, state, item)."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    eng = create_engine(db)
    Base.metadata.create_all(eng)
    with eng.begin() as c:
        c.execute(insert(HostRow), [{"name": "h", "slots": 2, "memory": 47.0, "state": "ok"}])
        c.execute(insert(JobRow), [{"id": 1, "kind": "job", "user": "u", "cls": "normal", "memory": 28.0,
                                    "threads": 1, "client": 1, "state": "done", "submitted_at": 0.0}])
        c.execute(insert(CycleRow), [{"id": i, "at": float(i), "seconds": 0.001 * i} for i in range(1, 6)])
        c.execute(insert(ShareRow), [{"id": s, "job": 1, "host": "h", "order": o, "activity": s,
                                      "started_at": 0.0, "cycle": cy, "gone_cycle": g} for s, o, cy, g in shares])
        c.execute(insert(ItemRow), [{"job": 1, "idx": i, "state": st, "attempts": 1, "share": 1, "item": v}
                                    for i, st, v in items])
    eng.dispose()
    return db


def test_a_clean_store_passes(tmp_path: Path) -> None:
    # two shares of order 2 on a machine of order 3, one after the other: 2 leaves at cycle 3, 3 comes then
    db = crafted_store(tmp_path, [(1, 2, 1, 3), (2, 2, 3, None)], [(0, "done", 0.25), (1, "done", 0.5)])
    r = check_store(db, {1: (0.25, 0.5)}, 15)
    assert r["over_order"] == 0 and r["items"]["wrong"] == 0, r
    assert r["jobs"]["states"] == {"done": 1} and r["processes_started"] == 2
    assert r["cycles"]["count"] == 5 and r["cycles"]["median_s"] == pytest.approx(0.003)
    assert r["cycles"]["max_s"] == pytest.approx(0.005) and r["machines"]["capacity_quanta"] == 3


def test_a_machine_above_its_order_and_an_item_not_done_are_caught(tmp_path: Path) -> None:
    # share 2 is placed at cycle 2 while share 1 still holds its space (gone at 3): 4 quanta of 3
    db = crafted_store(tmp_path, [(1, 2, 1, 3), (2, 2, 2, None)], [(0, "done", 0.25), (1, "queued", 0.5)])
    r = check_store(db, {1: (0.25, 0.5, 0.75)}, 15)
    assert r["over_order"] == 1 and r["over_order_samples"][0] == {"cycle": 2, "host": "h", "used": 4, "order": 3}
    assert r["items"]["wrong"] == 1 and "2 item rows for 3 items" in r["items"]["wrong_samples"][0]
    r = check_store(db, {1: (0.25, 0.5)}, 15)
    assert r["items"]["wrong"] == 1 and "queued" in r["items"]["wrong_samples"][0]


@needs_traces
def test_the_workload_and_the_cluster_as_the_importers_read_them() -> None:
    spec = DuccLiveSpec(traces=str(TRACES))
    jobs, info = read_jobs(spec)
    assert info["jobs"] == info["jobs_in_trace"] == 32 and info["full"]
    assert info["items"] == sum(len(j.items) for j in jobs) == 128_239
    assert info["submission_span_s"] == pytest.approx(9.2)  # 920 s spread / 100
    assert {j.memory for j in jobs} == {28.0, 37.0} and {j.cls for j in jobs} == {"normal"}
    assert max(max(j.items) for j in jobs) < 2.0  # ms / 96 / 1000 / 100
    assert read_cluster(spec) == {31.0: 29, 47.0: 20, 79.0: 4}
    assert read_cluster(DuccLiveSpec(traces=str(TRACES), machines=3)) == {31.0: 1, 47.0: 1, 79.0: 1}
    assert sum(read_cluster(DuccLiveSpec(traces=str(TRACES), machines=10)).values()) == 10


@needs_traces
@pytest.mark.timeout(60)
def test_a_short_real_run_passes_its_own_checks() -> None:
    t = time.monotonic()
    args = ["bench", "ducc-live", "--traces", str(TRACES), "--jobs", "5", "--max-items", "40", "--machines", "3",
            "--timeout", "40", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    r, m = out["result"], out["machine"]
    assert m["logical_cpus"] >= 1
    assert r["ok"], r["checks"]
    ck = r["checks"]
    assert ck["every_job_done"] and ck["every_item_done_once"] and ck["never_above_order"]
    assert set(ck["cycle_median"]) == {"target", "measured", "met"}
    assert r["jobs"] == 5 and r["items"] == r["store"]["items"]["rows"] == r["workload"]["items"] > 0
    assert r["store"]["items"]["states"] == {"done": r["items"]}
    assert r["cluster"]["machines"] == 3 and r["cluster"]["capacity_quanta"] == 2 + 3 + 5
    assert r["processes_started"] >= 1 and r["evictions"] >= 0
    c = r["cycles"]
    assert c["count"] >= 1 and 0 < c["median_s"] <= c["p90_s"] <= c["max_s"]
    assert r["master"]["peak_rss_mib"] > 10 and r["master"]["cpu_s"] > 0
    assert 0 < r["run_s"] <= r["wall_s"] <= time.monotonic() - t
    assert r["processes_left_behind"] == 0 and r["workdir"] is None
    assert not r["workload"]["full"]
