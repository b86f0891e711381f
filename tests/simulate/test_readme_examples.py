"""The README's "Simulate" commands run as written (their /tmp/ files in a test directory), from a
fresh cache: `apportion traces fetch` takes the traces from a local HTTP server serving
../shared/traces (the same public files) as a mirror."""

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
    assert len(cmds) == 11
    assert cmds[1].startswith("apportion traces fetch ")
    assert not any("shared/traces" in c for c in cmds)
    assert all(c.startswith("apportion ") for c in cmds)


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/traces beside the repository (not here)")
def test_readme_simulate_examples_run_as_written(tmp_path):
    from tests.traces.mirror import serve

    exe = str(Path(sys.executable).with_name("apportion"))
    env = {**os.environ, "PATH": f"{Path(exe).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "APPORTION_TRACES": str(tmp_path / "cache")}
    env.pop("APPORTION_TRACES_REGISTRY", None)
    with serve(SHARED) as (mirror, asked):
        env["APPORTION_TRACES_MIRROR"] = mirror
        ran = _run_all(tmp_path, exe, env)
    assert "/NASA-iPSC-1993-3.1-cln.swf.gz" in asked and "/ducc/ducc.classes" in asked
    assert (tmp_path / "cache" / "ducc" / "mega-15-min" / "jobs.prepare").is_file()
    assert ran >= 10
    nasa = json.loads((tmp_path / "nasa" / "result.json").read_text())
    assert nasa["jobs"] > 18_000 and set(nasa["consumers"]) == {"/Physics", "/Aero", "/Others"}
    assert (tmp_path / "nasa" / "report.html").stat().st_size > 0
    assert "/g1" in (tmp_path / "curie.map.yaml").read_text()
    assert len(json.loads((tmp_path / "sweep" / "sweep.json").read_text())["variants"]) == 5


def _run_all(tmp_path: Path, exe: str, env: dict[str, str]) -> int:
    ran = 0
    for cmd in _commands():
        if cmd.startswith("apportion simulate /tmp/curie.plan.yaml") and not os.environ.get(CURIE_REPLAY):
            # the whole Curie replay is minutes of CPU: `apportion bench simulate curie` runs the same
            # replay (map by group, then simulate) and records it in docs/performance.md
            continue
        line = cmd.replace("/tmp/", f"{tmp_path}/")
        p = subprocess.run(["bash", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, f"{cmd}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        ran += 1
    return ran
