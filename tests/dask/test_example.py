"""examples/service-dask runs as its README says: its plan on a real master, two agents, and
dask_sum.py finding the master and token in the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="Dask is not installed: pip install 'apportion[dask]'")

from tests.service.live import reap, start_agent, start_master, wait_until  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "service-dask"


def test_dask_sum_runs_on_the_examples_plan(tmp_path: Path) -> None:
    m = start_master(tmp_path / "m", (EXAMPLE / "plan.yaml").read_text())
    agents = [start_agent(m, name, tmp_path / name, slots=2) for name in ("host1", "host2")]
    try:
        with m.http() as c:
            wait_until(lambda: sum(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]) == 2, 30,
                       "both agents up")
        token_file = tmp_path / "admin.token"
        token_file.write_text(m.token + "\n")
        env = {k: v for k, v in os.environ.items() if k != "APPORTION_TOKEN"}
        env.update(APPORTION_MASTER=m.url, APPORTION_TOKEN_FILE=str(token_file))
        out = subprocess.run([sys.executable, str(EXAMPLE / "dask_sum.py"), "--workers", "3", "--rounds", "2",
                              "--size", str(10**6), "--chunk", str(10**5)], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        rounds = [line for line in out.stdout.splitlines() if " round " in line]
        assert len(rounds) == 2 and all(f"sum = {10**6 * (10**6 - 1) // 2} (right)" in r for r in rounds), out.stdout
        assert "allocation 1 under /Apps/dask" in out.stdout
        assert out.stdout.rstrip().endswith("cluster closed: workers gone, allocation ended")
        with m.http() as c:
            acts = c.get("/v1/activities").json()["activities"]
        assert len(acts) >= 3 and all(a["state"] == "exited" and a["exit_code"] == 0 for a in acts), acts
    finally:
        for a in agents:
            a.kill()
        m.proc.kill()
        reap()
