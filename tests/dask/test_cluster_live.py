"""ApportionCluster end to end: a real master, real agents, real Dask worker processes and
Dask's own client. Every wait is bounded and waits for a state."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

REASON = "Dask is not installed: pip install 'apportion[dask]'"
pytest.importorskip("distributed", reason=REASON)
da = pytest.importorskip("dask.array", reason=REASON)

from distributed import Client, wait  # noqa: E402

from apportion.dask import ApportionCluster  # noqa: E402
from tests.dask.conftest import Pool  # noqa: E402
from tests.service.live import wait_until  # noqa: E402

REPO = Path(__file__).resolve().parents[2]  # the workers import this module's functions from here
N = 10**7
TOTAL = N * (N - 1) // 2


def slow_identity(block, seconds):  # noqa: ANN001 - a numpy block
    time.sleep(seconds)
    return block


def connected(client: Client) -> int:
    return len(client.scheduler_info()["workers"])


def cluster_on(pool: Pool, **kwargs) -> ApportionCluster:
    return ApportionCluster("/dask", "pool", master=pool.master.url, token=pool.master.token,
                            worker_env={"PYTHONPATH": str(REPO)}, **kwargs)


def test_a_consumer_the_plan_does_not_know_is_a_clear_error(pool: Pool) -> None:
    with pytest.raises(RuntimeError, match="no allocation for /nope: .*422.*not a consumer of the plan"):
        ApportionCluster("/nope", master=pool.master.url, token=pool.master.token)


def test_scale_up_and_down(pool: Pool) -> None:
    with cluster_on(pool) as cluster, Client(cluster) as client:
        aid = cluster.allocation_id
        assert pool.allocation(aid)["max"] == 0
        cluster.scale(4)
        client.wait_for_workers(4, timeout=60)
        alloc = pool.allocation(aid)
        assert (alloc["max"], alloc["held"], alloc["hosts"]) == (4, 4, {"h1": 2, "h2": 2})
        x = da.arange(N, chunks=N // 40).persist()
        wait(x)

        cluster.scale(2)  # returns once the extra workers are gone and their slots released
        assert connected(client) == 2
        alloc = pool.allocation(aid)
        assert (alloc["max"], alloc["held"]) == (2, 2)
        assert x.sum().compute() == TOTAL  # the retired workers' chunks moved to the others
        ended = [a for a in pool.activities(aid) if a["state"] not in ("starting", "running")]
        assert len(ended) == 2 and all(a["state"] == "exited" and a["exit_code"] == 0 for a in ended), ended
        assert pool.forced(aid) == []

        cluster.scale(3)
        client.wait_for_workers(3, timeout=60)
        assert pool.allocation(aid)["held"] == 3
    # close() ended the allocation; every worker exited by itself
    wait_until(lambda: all(a["state"] not in ("starting", "running") for a in pool.activities(aid)), 20,
               "every worker gone")
    assert all(a["exit_code"] == 0 for a in pool.activities(aid) if a["state"] == "exited")
    with pytest.raises(Exception, match="404"):
        pool.allocation(aid)


def test_adapt_from_zero_under_load_and_back(pool: Pool) -> None:
    with cluster_on(pool) as cluster, Client(cluster) as client:
        aid = cluster.allocation_id
        cluster.adapt(minimum=0, maximum=4, interval="200ms", wait_count=3, target_duration="1s")
        futures = client.map(time.sleep, [0.25] * 48, pure=False)  # 12 s of work for one worker
        wait_until(lambda: connected(client) == 4, 60, "4 workers under load")
        assert pool.allocation(aid)["max"] == 4  # the adaptive target, capped at maximum
        assert client.gather(futures) == [None] * 48
        del futures
        wait_until(lambda: (a := pool.allocation(aid))["max"] == 0 and a["held"] == 0, 60,
                   "the allocation back to nothing once idle")
        wait_until(lambda: connected(client) == 0, 20, "no worker left")
        acts = pool.activities(aid)
        assert len(acts) >= 4
        assert all(a["state"] == "exited" and a["exit_code"] == 0 for a in acts), acts
        assert pool.forced(aid) == []


def test_a_reduction_survives_a_reclaim_of_half_the_slots(pool: Pool) -> None:
    with cluster_on(pool) as cluster, Client(cluster) as client:
        aid = cluster.allocation_id
        cluster.scale(4)
        client.wait_for_workers(4, timeout=60)
        x = da.arange(N, chunks=N // 100).map_blocks(slow_identity, 0.05, dtype=int)
        total = client.compute(x.sum())  # about 1.3 s of work on 4 workers

        with pool.master.http() as c:  # /web, share ratio 3 to /dask's 1, asks for half of the slots
            web = c.post("/v1/clients", json={"name": "web", "consumer": "/web"}).json()["id"]
            wid = c.post("/v1/allocations", json={"client": web, "consumer": "/web", "max": 2}).json()["id"]
        reclaims = wait_until(lambda: [e for e in pool.events(cluster.client_id) if e["type"] == "reclaim"], 20,
                              "a reclaim of /dask's slots")
        assert sum(e["slots"] for e in reclaims) == 2 and all(e["for"] == "/web" for e in reclaims)
        assert not total.done(), "the reduction ended before the reclaim: it did not run through it"

        assert total.result(timeout=60) == TOTAL
        wait_until(lambda: pool.allocation(wid)["held"] == 2, 30, "/web granted its half")
        alloc = pool.allocation(aid)
        assert alloc["held"] == 2 and alloc["reclaiming"] == []
        assert connected(client) == 2
        # given back by retirement, before the deadline: nothing taken, nobody signalled
        assert [e for e in pool.events(cluster.client_id) if e["type"] == "removed"] == []
        assert pool.forced(aid) == []
        ended = [a for a in pool.activities(aid) if a["state"] not in ("starting", "running")]
        assert len(ended) == 2 and all(a["state"] == "exited" and a["exit_code"] == 0 for a in ended), ended
        assert all(r.in_time and not r.forced for r in cluster.reclaims), cluster.reclaims
        assert sorted(w for r in cluster.reclaims for w in r.workers) == sorted(
            f"{cluster.name}-{a['id']}" for a in ended)


def test_a_lost_host_loses_its_workers_and_dask_recomputes(pool: Pool) -> None:
    with cluster_on(pool) as cluster, Client(cluster) as client:
        aid = cluster.allocation_id
        cluster.scale(4)
        client.wait_for_workers(4, timeout=60)
        x = da.arange(N, chunks=N // 40).map_blocks(slow_identity, 0.01, dtype=int).persist()
        wait(x)
        on_h2 = {w.address for w in cluster.workers.values() if w.host == "h2"}
        only_there = [k for k, where in client.who_has(x).items() if where and set(where) <= on_h2]
        assert only_there, "no chunk was held on h2 alone: the loss would prove nothing"

        # h2 dies: its agent and its processes
        pool.agents["h2"].kill()
        pids = [a["pid"] for a in pool.activities(aid) if a["host"] == "h2" and a["state"] == "running"]
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

        assert x.sum().compute() == TOTAL  # h2's chunks computed again on h1
        wait_until(lambda: any(e["kind"] == "lost" and e["host"] == "h2" for e in cluster.lost), 30,
                   "the master to declare h2 lost")
        assert pool.allocation(aid)["hosts"] == {"h1": 2}
        assert {w.host for w in cluster.workers.values()} == {"h1"}
        assert connected(client) == 2
        lost = [a for a in pool.activities(aid) if a["host"] == "h2"]
        assert [a["state"] for a in lost] == ["lost", "lost"]
