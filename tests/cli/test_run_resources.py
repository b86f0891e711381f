"""``apportion run --resources``: what each slot needs reaches the master, and each command sees
only its GPUs. A real master and a real agent told of two GPUs (``--gpus 0,1``, no driver)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.service.live import CLI, one_host, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /Apps}
"""
SHOW = "import os; print('sees', repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with one_host(tmp_path_factory.mktemp("runres"), PLAN, "g1", 2, ["--gpus", "0,1", "--resource", "fpga=1"]) as m:
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


@pytest.mark.timeout(120)
def test_a_custom_kind_is_asked_for_by_its_name(cluster) -> None:
    """``--resources fpga=1`` asks for one of the kind the agent reports with ``--resource fpga=1``:
    the master holds it for the command while it runs, and frees it after."""
    shared = Path(tempfile.mkdtemp(prefix="apportion-runres-"))
    shared.chmod(0o755)  # the command may run as another user than this test's
    go = shared / "go"
    wait = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)\nprint('done')"
    p = subprocess.Popen([*CLI, "run", "--master", cluster.url, "--consumer", "/Apps", "--resources", "fpga=1", "--",
                          sys.executable, "-c", wait], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "APPORTION_TOKEN": cluster.token})
    try:
        with cluster.http() as c:
            held = wait_until(lambda: [a for a in c.get("/v1/allocations").json()["allocations"] if a["held"]], 60,
                              "the command's allocation granted")
            assert held[0]["resources"]["custom"] == {"fpga": 1}, held[0]
            used = wait_until(lambda: c.get("/v1/hosts").json()["hosts"][0]["resources_used"].get("fpga"), 30,
                              "the fpga counted as used")
            assert used == 1
            go.touch()
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0 and out.splitlines() == ["[g1] done"], (out, err)
            wait_until(lambda: not c.get("/v1/hosts").json()["hosts"][0]["resources_used"].get("fpga"), 30,
                       "the fpga free again")
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        shutil.rmtree(shared, ignore_errors=True)
