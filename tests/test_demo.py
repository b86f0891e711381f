"""`make demo` as the README promises it: the live service on SQLite, a reclaim, and the tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "examples" / "service" / "demo.py"


def test_the_demo_runs_a_reclaim_end_to_end():
    r = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "/Apps/batch holds 4 slots on host1 and runs 4 workers" in out
    assert "reclaim: 3 slots of batch on host1 for /Apps/web" in out
    assert "then web was granted {'host1': 3}" in out
    assert out.count("SHORTFALL") == 2  # `apportion rg Workers` before and after
