"""Reading files once and fast: JSON text through the ``json`` module (lines only when a
file is rejected), YAML through libyaml's composer with the same lines as before, and
``apportion solve`` deciding EGO or DUCC from the one parsed document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.plan import PlanError, load_scenario
from apportion.plan import positions as positions_module
from apportion.plan.positions import _compose, load_document, parse_yaml
from tests.plan.test_load import PLAN_YAML

SCENARIO = {
    "hosts": [{"name": "h[1-4]", "slots": 4}],
    "resource_groups": [{"name": "RG1", "hosts": ["h[1-4]"]}],
    "consumers": [{"path": "/A", "owned": 8, "lend": True}, {"path": "/B"}],
    "timeline": [{"at": 0, "requests": [{"id": "b1", "consumer": "/B", "max": 16}]}],
}


def _write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_json_text_is_read_by_the_json_module_without_positions(tmp_path):
    doc = load_document(_write(tmp_path, json.dumps(SCENARIO, indent=1)))
    assert doc.data == SCENARIO and doc.positions == {} and doc.text is not None
    assert doc.with_positions().positions[("timeline", 0, "requests", 0, "max")] > 1


def test_json_and_yaml_text_give_the_same_scenario(tmp_path):
    from_json = load_scenario(_write(tmp_path, json.dumps(SCENARIO, indent=1), "a.yaml"))
    from_yaml = load_scenario(_write(tmp_path, yaml.safe_dump(SCENARIO), "b.yaml"))
    assert from_json.plan == from_yaml.plan and from_json.steps == from_yaml.steps


def test_a_rejected_json_file_is_read_again_for_its_lines(tmp_path):
    bad = json.loads(json.dumps(SCENARIO))
    bad["timeline"][0]["requests"][0]["max"] = "lots"
    bad["consumers"][1]["colour"] = "blue"
    text = json.dumps(bad, indent=1)
    with pytest.raises(PlanError) as err:
        load_scenario(_write(tmp_path, text))
    found = {(p.field, p.line) for p in err.value.problems}
    assert ("timeline[0].requests[0].max", _line_of(text, '"lots"')) in found
    assert ("consumers[1].colour", _line_of(text, '"colour"')) in found
    assert all(p.file.endswith("scenario.yaml") for p in err.value.problems)


def test_a_key_given_twice_in_json_text_is_reported_with_its_line(tmp_path):
    text = '{\n "hosts": [],\n "policy": {\n  "base_quota": true,\n  "base_quota": false\n }\n}\n'
    with pytest.raises(PlanError) as err:
        load_scenario(_write(tmp_path, text))
    p = err.value.problems[0]
    assert (p.field, p.line) == ("policy.base_quota", 5) and "given twice" in p.reason


def test_yaml_flow_text_that_is_not_json_is_still_yaml(tmp_path):
    doc = load_document(_write(tmp_path, "{hosts: [{name: a, slots: 2}]}\n"))
    assert doc.data == {"hosts": [{"name": "a", "slots": 2}]} and doc.positions[("hosts", 0)] == 1


@pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML built without libyaml")
def test_libyaml_composer_notes_the_same_lines_as_pyyaml():
    fast = _compose(yaml.CSafeLoader, PLAN_YAML, "plan.yaml")
    slow = _compose(yaml.SafeLoader, PLAN_YAML, "plan.yaml")
    assert fast.data == slow.data and fast.positions == slow.positions and len(fast.positions) > 40
    assert positions_module._SafeLoader is yaml.CSafeLoader


@pytest.mark.parametrize("text", ["hosts:\n  - name: a\n   slots: 2\n", "hosts: [a, b\nconsumers: []\n",
                                  "a: 1\n\tb: 2\n"])
def test_yaml_syntax_errors_are_worded_by_pyyaml_as_before(text):
    with pytest.raises(yaml.MarkedYAMLError) as pure:
        yaml.load(text, Loader=yaml.SafeLoader)
    with pytest.raises(PlanError) as err:
        parse_yaml(text, "bad.yaml")
    p = err.value.problems[0]
    assert (p.file, p.line, p.field) == ("bad.yaml", pure.value.problem_mark.line + 1, "yaml")
    assert p.reason.startswith(pure.value.problem)


def test_a_large_malformed_json_file_names_file_line_and_field(tmp_path):
    from apportion.bench.scenario_files import ego_scenario
    from apportion.bench.workload import WorkloadSpec

    mapping = ego_scenario(WorkloadSpec(hosts=400, leaves=60, requests=3_000, groups=2, seed=5))
    mapping["timeline"][0]["requests"][2_500]["consumer"] = "/nobody"
    text = json.dumps(mapping, indent=1)
    with pytest.raises(PlanError) as err:
        load_scenario(_write(tmp_path, text, "big.yaml"))
    [p] = err.value.problems
    assert str(p).startswith(f"{tmp_path / 'big.yaml'}:{_line_of(text, '/nobody')}: "
                             "timeline[0].requests[2500].consumer: unknown consumer /nobody")


def test_solve_reads_the_file_once(tmp_path, monkeypatch):
    reads: list[str] = []
    real = positions_module.load_document

    def counting(path):
        reads.append(str(path))
        return real(path)

    monkeypatch.setattr("apportion.plan.positions.load_document", counting)
    path = _write(tmp_path, json.dumps(SCENARIO))
    res = CliRunner().invoke(app, ["solve", str(path), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["snapshots"][0]["requests"]["b1"]["held"] == 16
    assert reads == [str(path)]


def test_lines_taken_again_keep_the_json_reading_of_the_data():
    doc = positions_module.parse_json('{\n "a": 1e3,\n "b": [1, 2]\n}\n', "x.yaml")
    again = doc.with_positions()
    assert again.data == {"a": 1000.0, "b": [1, 2]}  # YAML 1.1 would read 1e3 as a string
    assert again.positions[("a",)] == 2 and again.positions[("b", 1)] == 3
