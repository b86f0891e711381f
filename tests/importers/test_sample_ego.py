"""The sample EGO configuration in examples/ego: `apportion import ego examples/ego -o plan.yaml`
reads it without a problem or a note, and the plan it writes solves as the files' comments say."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from apportion.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "ego"
runner = CliRunner()

# a day on the sample cluster: Teaching and Overnight fill ComputeHosts, then Genomics wants its own back
TIMELINE = """
timeline:
  - at: 0
    requests:
      - {id: teach, consumer: /Teaching, max: 40}
      - {id: night, consumer: /Overnight, max: 40, group: ComputeHosts}
      - {id: night-mem, consumer: /Overnight, max: 12, group: LargeMemoryHosts}
  - at: 60
    requests:
      - {id: genome, consumer: /Research/Genomics, max: 16, group: ComputeHosts}
      - {id: genome-mem, consumer: /Research/Genomics, max: 32, group: LargeMemoryHosts}
  - at: 200
"""


def _import(tmp_path: Path) -> Path:
    out = tmp_path / "plan.yaml"
    r = runner.invoke(app, ["import", "ego", str(SAMPLE), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "8 hosts, 2 resource groups, 5 consumers" in " ".join(r.output.split())
    assert "not carried" not in r.output and "unknown element" not in r.output
    return out


def test_the_sample_imports_whole(tmp_path):
    plan = yaml.safe_load(_import(tmp_path).read_text(encoding="utf-8"))
    assert [g["name"] for g in plan["resource_groups"]] == ["ComputeHosts", "LargeMemoryHosts"]
    assert plan["resource_groups"][1]["select"] == "select(mem >= 512) order(-mem)"
    assert {h["name"]: h["slots"] for h in plan["hosts"]} == {
        **{f"node0{i}": 8 for i in range(1, 7)}, "bigmem1": 16, "bigmem2": 16}
    by_path = {c["path"]: c for c in plan["consumers"]}
    assert list(by_path) == ["/Research", "/Research/Genomics", "/Research/Climate", "/Teaching", "/Overnight"]
    assert by_path["/Research/Genomics"]["groups"]["ComputeHosts"] == {
        "owned": 16, "lend": True, "lend_limit": 12, "grace": 60}
    assert by_path["/Teaching"]["groups"]["ComputeHosts"] == {"share_ratio": 2, "borrow_limit": 8, "grace": 60}
    assert by_path["/Overnight"]["groups"]["ComputeHosts"] == {"max": 24, "grace": 30}
    assert by_path["/Overnight"]["execution_user"] == "batch"
    r = runner.invoke(app, ["validate", str(tmp_path / "plan.yaml")])
    assert r.exit_code == 0, r.output


def test_the_imported_plan_solves_as_its_comments_say(tmp_path):
    scenario = tmp_path / "day.yaml"
    scenario.write_text(_import(tmp_path).read_text(encoding="utf-8") + TIMELINE, encoding="utf-8")
    r = runner.invoke(app, ["solve", str(scenario), "--json"])
    assert r.exit_code == 0, r.output
    snaps = json.loads(r.stdout)["snapshots"]
    held = [{rid: v["held"] for rid, v in s["requests"].items()} for s in snaps]
    # t=0: the 24 unowned slots go 2:1; Teaching borrows up to its limit (8) of Genomics' 12
    # lendable slots and Overnight the other 4; Climate's 8 are not lent and stay idle
    assert held[0] == {"teach": 24, "night": 12, "night-mem": 12}
    teaching = snaps[0]["consumers"]["/Teaching"]["groups"]["ComputeHosts"]
    assert (teaching["deserved"], teaching["borrowed"]) == (16, 8)
    # t=60: Genomics takes its 4 unlent slots at once and reclaims the 12 it lent, each borrower
    # keeping them for its own grace period (Teaching 60 s, Overnight 30 s)
    assert held[1]["genome"] == 4
    assert sorted((x["request"], x["slots"], x["deadline"]) for x in snaps[1]["reclaiming"]) == [
        ("night", 4, 90.0), ("teach", 8, 120.0)]
    # t=200: every owner has its own, the pool is shared 2:1; on LargeMemoryHosts (32 slots,
    # Research 3 : Overnight 1) Climate's unused part of Research's share is spread from the
    # top (leaf enforcement): Genomics 12 + 9, Overnight 8 + 3
    assert held[2] == {"teach": 16, "night": 8, "night-mem": 11, "genome": 16, "genome-mem": 21}
    assert snaps[2]["reclaiming"] == []
