"""``apportion run --resources``: what each slot needs reaches the master, and each command sees
only its GPUs. A real master and a real agent told of two GPUs (``--gpus 0,1``, no driver)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.service.live import CLI, one_host

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /Apps}
"""
SHOW = "import os; print('sees', repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with one_host(tmp_path_factory.mktemp("runres"), PLAN, "g1", 2, ["--gpus", "0,1"]) as m:
        yield m


def _run(m, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "run", "--master", m.url, "--consumer", "/Apps", *args], capture_output=True,
                          text=True, timeout=90, env={**os.environ, "APPORTION_TOKEN": m.token})


@pytest.mark.timeout(120)
def test_each_command_sees_only_its_gpus(cluster) -> None:
    p = _run(cluster, "--slots", "2", "--resources", "gpus=1,cores=1", "--", sys.executable, "-c", SHOW)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert sorted(p.stdout.splitlines()) == ["[g1] sees '0'", "[g1] sees '1'"], p.stdout
    # half a GPU each: both on the same device
    p = _run(cluster, "--slots", "2", "--resources", "gpus=0.5", "--", sys.executable, "-c", SHOW)
    assert p.returncode == 0 and p.stdout.splitlines() == ["[g1] sees '0'"] * 2, (p.stdout, p.stderr)
    # none asked for: none visible
    p = _run(cluster, "--", sys.executable, "-c", SHOW)
    assert p.returncode == 0 and p.stdout.splitlines() == ["[g1] sees ''"], (p.stdout, p.stderr)


def test_bad_resources_name_the_option(cluster) -> None:
    p = _run(cluster, "--resources", "gpus=lots", "--", "true")
    assert p.returncode == 2 and "--resources" in p.stderr and "'lots' is not a number" in p.stderr, p.stderr
    with cluster.http() as c:
        assert c.get("/v1/allocations").json()["allocations"] == []
