"""Scenarios with resources of several kinds, through the loader, the runner and
``apportion solve --json``: per-kind use and dominant shares in the snapshots, and a
per-kind ownership reclaimed after its grace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from apportion.plan import load_scenario
from apportion.scenario.runner import run

PAPER = """\
hosts:
  - name: m1
    resources: {cores: 9, memory: 18}
resource_groups:
  - name: all
    hosts: [m1]
consumers:
  - path: /A
  - path: /B
timeline:
  - at: 0
    requests:
      - {id: a, consumer: /A, max: 100, resources: {cores: 1, memory: 4}}
      - {id: b, consumer: /B, max: 100, resources: {cores: 3, memory: 1}}
"""

OWNED = """\
hosts:
  - name: g[1-2]
    resources: {cores: 32, memory: 256, gpus: 8}
  - name: plain
    slots: 4
resource_groups:
  - name: GPU
    hosts: ["g[1-2]"]
    packing: bestfit
  - name: CPU
    hosts: [plain]
policy:
  weights: {gpus: 4}
consumers:
  - path: /train
    resource_groups: [GPU]
    groups:
      GPU: {owned: {gpus: 8}, lend: [gpus]}
  - path: /research
    resource_groups: [GPU, CPU]
    grace: 30
timeline:
  - at: 0
    requests:
      - {id: r, consumer: /research, group: GPU, max: 16, resources: {cores: 2, memory: 16, gpus: 1}}
      - {id: s, consumer: /research, group: CPU, max: 2}
  - at: 10
    requests:
      - {id: t, consumer: /train, max: 8, resources: {cores: 4, memory: 32, gpus: 1}}
  - at: 50
"""


def test_the_papers_example_through_solve_json(tmp_path: Path) -> None:
    f = tmp_path / "drf.yaml"
    f.write_text(PAPER)
    out = subprocess.run([sys.executable, "-c", "from apportion.cli.main import main; main()", "solve", str(f), "--json"],
                         capture_output=True, text=True, timeout=120, check=True)
    snap = json.loads(out.stdout)["snapshots"][0]
    assert snap["requests"]["a"] == {"held": 3, "hosts": {"m1": 3}, "resources": {"cores": 1.0, "memory": 4.0}}
    assert snap["requests"]["b"]["held"] == 2
    kinds = snap["kinds"]["all"]
    assert kinds["totals"] == {"cores": 9.0, "memory": 18.0}
    assert kinds["consumers"]["/A"] == {"used": {"cores": 3.0, "memory": 12.0}, "dominant_share": 0.666667}
    assert kinds["consumers"]["/B"]["dominant_share"] == 0.666667
    assert set(snap) >= {"at", "consumers", "requests", "reclaiming", "lost", "decisions"}  # the fields kept


def test_per_kind_ownership_comes_back_after_grace(tmp_path: Path) -> None:
    f = tmp_path / "owned.yaml"
    f.write_text(OWNED)
    s0, s10, s50 = run(load_scenario(f))
    assert s0["requests"]["r"]["held"] == 16 and s0["requests"]["s"]["held"] == 2  # the owner's idle GPUs are lent
    assert s0["kinds"]["GPU"]["consumers"]["/research"]["dominant_share"] == 4.0  # every GPU, weighing 4
    assert sum(r["slots"] for r in s10["reclaiming"]) == 8 and {r["for"] for r in s10["reclaiming"]} == {"/train"}
    assert {r["deadline"] for r in s10["reclaiming"]} == {40.0}
    assert s50["requests"]["t"]["held"] == 8 and s50["requests"]["r"]["held"] == 8
    assert s50["kinds"]["GPU"]["consumers"]["/train"]["used"] == {"cores": 32.0, "gpus": 8.0, "memory": 256.0}
    assert not s50["reclaiming"]
