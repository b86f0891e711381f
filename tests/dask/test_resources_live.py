"""ApportionCluster(resources=...): each slot's needs reach the master, and each Dask worker
sees only its GPUs. A real master and a real agent told of two GPUs (``--gpus 0,1``, no driver)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REASON = "Dask is not installed: pip install 'apportion[dask]'"
pytest.importorskip("distributed", reason=REASON)

from distributed import Client  # noqa: E402

from apportion.dask import ApportionCluster  # noqa: E402
from tests.dask.conftest import PLAN  # noqa: E402
from tests.service.live import one_host  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def visible_gpus() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")


@pytest.mark.timeout(180)
def test_workers_see_only_their_gpus(tmp_path: Path) -> None:
    with one_host(tmp_path, PLAN, "g1", 2, ["--gpus", "0,1"]) as m, \
            ApportionCluster("/dask", "pool", master=m.url, token=m.token, worker_env={"PYTHONPATH": str(REPO)},
                             resources={"gpus": 1, "cores": 1, "memory": 1}) as cluster, Client(cluster) as client:
        cluster.scale(2)
        client.wait_for_workers(2, timeout=90)
        with m.http() as c:
            alloc = c.get(f"/v1/allocations/{cluster.allocation_id}").json()
        assert alloc["resources"] == {"cores": 1, "memory": 1, "gpus": 1, "gpu_model": None}, alloc
        assert sorted(g for held in alloc["devices"]["g1"] for g in held["gpus"]) == [0, 1], alloc
        seen = client.run(visible_gpus)
        assert sorted(seen.values()) == ["0", "1"], seen


def test_bad_resources_are_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="unknown kind 'slots'"):  # a name the vector keeps for itself
        ApportionCluster("/dask", master="http://127.0.0.1:9", token="x", resources={"slots": 1})
