"""The README's "Simulate" commands run as written (their /tmp/ files in a test directory)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "traces"
CURIE_REPLAY = "APPORTION_SLOW_EXAMPLES"


def _commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Simulate", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    joined = block.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.split("  #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def test_the_block_was_read():
    cmds = _commands()
    assert len(cmds) == 8
    assert all(c.startswith("apportion ") for c in cmds)


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/traces beside the repository (not here)")
def test_readme_simulate_examples_run_as_written(tmp_path):
    exe = str(Path(sys.executable).with_name("apportion"))
    ran = 0
    for cmd in _commands():
        if cmd.startswith("apportion simulate /tmp/curie.plan.yaml") and not os.environ.get(CURIE_REPLAY):
            # the whole Curie replay is minutes of CPU: `apportion bench simulate curie` runs the same
            # replay (map by group, then simulate) and records it in docs/performance.md
            continue
        line = cmd.replace("/tmp/", f"{tmp_path}/").replace("apportion ", f"{exe} ", 1)
        p = subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, f"{cmd}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        ran += 1
    assert ran >= 7
    nasa = json.loads((tmp_path / "nasa" / "result.json").read_text())
    assert nasa["jobs"] > 18_000 and set(nasa["consumers"]) == {"/Physics", "/Aero", "/Others"}
    assert (tmp_path / "nasa" / "report.html").stat().st_size > 0
    assert "/g1" in (tmp_path / "curie.map.yaml").read_text()
    assert len(json.loads((tmp_path / "sweep" / "sweep.json").read_text())["variants"]) == 5
