"""`make demo` as the README promises it: the live service on SQLite, a reclaim, and the tables."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psutil

DEMO = Path(__file__).resolve().parents[1] / "examples" / "service" / "demo.py"


def test_the_demo_runs_a_reclaim_end_to_end():
    r = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "/Apps/batch holds 4 slots on host1 and runs 4 workers" in out
    assert "reclaim: 3 slots of batch on host1 for /Apps/web" in out
    assert "then web was granted {'host1': 3}" in out
    assert out.count("SHORTFALL") == 2  # `apportion rg Workers` before and after
    # and it leaves nothing running: the workers were stopped through the master before the agent
    # went, so the last resort (kill what still has the demo's master in its environment) found nothing
    assert "processes were still running after the stop" not in out
    url = re.search(r"master (http://127\.0\.0\.1:\d+) on", out).group(1)
    left = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("APPORTION_MASTER") == url:
                left.append(p.cmdline())
        except psutil.Error:
            continue
    assert left == []
