"""`apportion import ego` and `apportion export ego`: IBM EGO's XML files to a plan and back.

The XML is written here from the element names of IBM's documentation (tests/importers/ego_texts.py).
Real files on disk, the import and export commands as the CLI mounts them, and `apportion validate` and
`apportion solve` as a user runs them (a subprocess).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer
import yaml
from typer.testing import CliRunner

from apportion.cli.importer import export_app, import_app

from apportion.importers.ego import export_ego, import_ego, write_files
from apportion.plan import PlanError, compile_plan, load_plan
from tests.importers.ego_texts import CONSUMER_TREES, FULL, FULL_PLAN, HOSTS, MARK, RESOURCE_GROUPS, line_of, write_ego

CLI = [sys.executable, "-m", "apportion.cli"]
# the two command groups mounted as apportion.cli.main mounts them, run in this process
APP = typer.Typer(pretty_exceptions_enable=False)
APP.add_typer(import_app, name="import")
APP.add_typer(export_app, name="export")


def apportion(*args: str) -> subprocess.CompletedProcess:
    """The installed command in a fresh process (validate, solve)."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def cli(*args: str) -> SimpleNamespace:
    """`apportion import ...` / `apportion export ...`."""
    r = CliRunner().invoke(APP, list(args))
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


def problems_of(paths: list[Path]) -> list[str]:
    with pytest.raises(PlanError) as e:
        import_ego(paths)
    return [str(p) for p in e.value.problems]


def trees_with(policies: str, name: str = "A") -> str:
    """A ConsumerTrees.xml with one consumer planned in ComputeHosts with these DistributionPolicies."""
    return f"""\
<?xml version="1.0" encoding="UTF-8"?>
<ConsumerTrees xmlns="http://www.platform.com/ego/2005/05/schema">
  <ConsumerHierarchy>
    <Consumer ConsumerName="{name}"/>
  </ConsumerHierarchy>
  <DistributionTree DistributionTreeName="ComputeHosts">
    <ResourceGroupName>ComputeHosts</ResourceGroupName>
    <Consumer ConsumerName="{name}">
      <DistributionPolicies>
{policies}
      </DistributionPolicies>
    </Consumer>
  </DistributionTree>
</ConsumerTrees>
"""


# --- every mapped field --------------------------------------------------------------------


def test_every_mapped_element_gives_its_plan_field(tmp_path):
    d = write_ego(tmp_path / "ego", FULL)
    result = import_ego([d])
    assert result.plan == FULL_PLAN
    plan = compile_plan(result.plan)
    by_path = plan.consumer_map()
    assert by_path["/LOB1/app2"].execution_user == "lob1"  # inherited from LOB1, as apportion does
    assert by_path["/LOB1/app1"].groups["ComputeHosts"].lend_limit == 4
    notes = {(Path(n.file).name, n.line, n.field): n.reason for n in result.notes}
    trees, md = "ConsumerTrees.xml", "MDPlan.xml"
    assert "not carried" in notes[(trees, line_of(CONSUMER_TREES, "<User>"), "<User>")]
    assert "'app1user'" in notes[(trees, line_of(CONSUMER_TREES, "MYDOMAIN"), "<ExecutionUser>")]
    assert "50 percent of the 6 hosts" in notes[(md, line_of(FULL["MDPlan.xml"], "percentage"), "<NumHosts>")]
    assert "remaining hosts of NoMgmt (of 3" in notes[(md, line_of(FULL["MDPlan.xml"], "remaining"), "<NumHosts>")]
    assert len(result.notes) == 4


def test_the_imported_plan_passes_apportion_validate(tmp_path):
    d = write_ego(tmp_path / "ego", FULL)
    out = tmp_path / "plan.yaml"
    r = cli("import", "ego", str(d), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr and "note" in r.stderr and "50 percent" in r.stderr
    text = out.read_text()
    assert text.startswith("# apportion plan imported from IBM EGO's files")
    assert yaml.safe_load(text) == FULL_PLAN
    v = apportion("validate", str(out))
    assert v.returncode == 0, v.stdout + v.stderr
    assert "7 hosts, 3 resource groups, 4 consumers" in v.stdout


def test_files_given_one_by_one_and_hosts_apart(tmp_path):
    d = write_ego(tmp_path / "ego", {k: v for k, v in FULL.items() if k != "hosts.yaml"})
    hosts = write_ego(tmp_path / "cluster", {"all-hosts.yaml": HOSTS}) / "all-hosts.yaml"
    files = [d / "ConsumerTrees.xml", d / "ResourceGroups.xml", d / "MDPlan.xml"]
    assert import_ego(files, hosts=hosts).plan == FULL_PLAN
    r = cli("import", "ego", *map(str, files), "--hosts", str(hosts))
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout) == FULL_PLAN


def test_without_mdplan_and_without_a_hierarchy(tmp_path):
    """MDPlan.xml is optional; a ConsumerTrees.xml with DistributionTrees only makes the tree from them."""
    trees = """\
<ConsumerTrees>
  <DistributionTree DistributionTreeName="t">
    <ResourceGroupName>ComputeHosts</ResourceGroupName>
    <Consumer ConsumerName="A">
      <Consumer ConsumerName="x"><DistributionPolicies><Rank>2</Rank></DistributionPolicies></Consumer>
    </Consumer>
  </DistributionTree>
</ConsumerTrees>
"""
    d = write_ego(tmp_path / "ego", {"ResourceGroups.xml": RESOURCE_GROUPS, "ConsumerTrees.xml": trees})
    plan = import_ego([d]).plan
    assert plan["consumers"] == [
        {"path": "/A", "resource_groups": ["ComputeHosts"]},
        {"path": "/A/x", "resource_groups": ["ComputeHosts"], "groups": {"ComputeHosts": {"rank": 2}}},
    ]
    # hosts named only in a ResourceList: availableSlots gives their slots
    assert plan["hosts"][0] == {"name": "c1", "slots": 4}
    assert plan["hosts"][-1] == {"name": "g2", "slots": 8}


# --- mistakes: named by file, line and element ---------------------------------------------


def test_malformed_xml_names_the_file_and_line(tmp_path):
    broken = RESOURCE_GROUPS.replace("</ResourceList>\n  </ResourceGroup>\n  <ResourceGroup ResourceGroupName=\"GPU",
                                     "</ResourceList>\n  <ResourceGroup ResourceGroupName=\"GPU", 1)
    d = write_ego(tmp_path / "ego", {**FULL, "ResourceGroups.xml": broken})
    problems = problems_of([d])
    assert len(problems) == 1
    assert problems[0].startswith(f"{d / 'ResourceGroups.xml'}:")
    assert ": XML: not well-formed: mismatched tag" in problems[0]
    r = cli("import", "ego", str(d))
    assert r.returncode == 2 and "not well-formed" in r.stderr and r.stdout == ""


def test_an_unknown_element_is_warned_and_the_rest_imported(tmp_path):
    trees = CONSUMER_TREES.replace("<Rank>1</Rank>", f"<Rank>1</Rank>\n        <Frobnicate>9</Frobnicate> {MARK}")
    trees = trees.replace("<ConsumerHierarchy>", '<ConsumerHierarchy xmlns:x="urn:other">\n    <x:Extra/>', 1)
    d = write_ego(tmp_path / "ego", {**FULL, "ConsumerTrees.xml": trees})
    result = import_ego([d])
    assert result.plan == FULL_PLAN
    unknown = [n for n in result.notes if "unknown element" in n.reason or "another namespace" in n.reason]
    assert [(n.line, n.field) for n in unknown] == [(4, "<Extra>"), (line_of(trees), "<Frobnicate>")]
    assert "unknown element in <DistributionPolicies>: not read" in unknown[1].reason
    assert "urn:other" in unknown[0].reason
    r = cli("import", "ego", str(d))
    assert r.returncode == 0 and "<Frobnicate>: unknown element" in r.stderr


def test_a_billion_laughs_document_is_refused_before_it_expands(tmp_path):
    entities = "\n".join(f' <!ENTITY lol{i} "{"&lol%d;" % (i - 1) * 10}">' for i in range(1, 10))
    bomb = f"""<?xml version="1.0"?>
<!DOCTYPE ConsumerTrees [
 <!ENTITY lol0 "lol">
{entities}
]>
<ConsumerTrees>&lol9;</ConsumerTrees>
"""
    d = write_ego(tmp_path / "ego", {**FULL, "ConsumerTrees.xml": bomb})
    started = time.process_time()
    problems = problems_of([d])
    assert time.process_time() - started < 5  # 10^9 "lol"s were never made
    assert len(problems) == 1
    assert problems[0].startswith(f"{d / 'ConsumerTrees.xml'}:3: <!ENTITY>: refused: the document declares the "
                                  "entity 'lol0'")
    assert "billion laughs" in problems[0]
    r = cli("import", "ego", str(d))
    assert r.returncode == 2 and "refused" in r.stderr


def test_an_external_entity_is_refused(tmp_path):
    xxe = """<?xml version="1.0"?>
<!DOCTYPE ConsumerTrees [ <!ENTITY secret SYSTEM "file:///etc/passwd"> ]>
<ConsumerTrees>&secret;</ConsumerTrees>
"""
    d = write_ego(tmp_path / "ego", {**FULL, "ConsumerTrees.xml": xxe})
    problems = problems_of([d])
    assert len(problems) == 1 and ": <!ENTITY>: refused" in problems[0] and "'secret'" in problems[0]


@pytest.mark.parametrize(("policies", "field", "reason"), [
    (f"<Rank>first</Rank> {MARK}", "<Rank>", "'first' is not a whole number"),
    (f"<SharingPolicy priority=\"-1\"> {MARK}\n<Shares>1</Shares></SharingPolicy>", "<SharingPolicy> priority",
     "-1 is below 0"),
    (f"<ReclaimGracePeriod>soon</ReclaimGracePeriod> {MARK}", "<ReclaimGracePeriod>",
     "'soon' is not a number of seconds"),
    # checked by apportion's own plan rules, reported at the element the value came from
    (f"<Ownership>2</Ownership><Lending><LendLimit>3</LendLimit> {MARK}\n</Lending>", "<LendLimit>",
     "consumers[0].groups.ComputeHosts.lend_limit: lend_limit 3 is above what /A owns in ComputeHosts (2)"),
    (f"<Rank>0</Rank> {MARK}", "<Rank>", "consumers[0].groups.ComputeHosts.rank:"),
])
def test_a_bad_value_names_file_line_and_element(tmp_path, policies, field, reason):
    trees = trees_with(policies)
    d = write_ego(tmp_path / "ego", {**FULL, "ConsumerTrees.xml": trees})
    problems = problems_of([d])
    where = f"{d / 'ConsumerTrees.xml'}:{line_of(trees)}: {field}: "
    assert any(p.startswith(where) and reason in p for p in problems), problems


def test_a_bad_execution_user_names_its_element(tmp_path):
    trees = CONSUMER_TREES.replace("<ExecutionUser>lob2</ExecutionUser>",
                                   f"<ExecutionUser>9 lives</ExecutionUser> {MARK}")
    d = write_ego(tmp_path / "ego", {**FULL, "ConsumerTrees.xml": trees})
    problems = problems_of([d])
    assert len(problems) == 1
    assert problems[0].startswith(f"{d / 'ConsumerTrees.xml'}:{line_of(trees)}: <ExecutionUser>: "
                                  "consumers[3].execution_user:")


def test_references_to_what_is_not_there(tmp_path):
    trees = CONSUMER_TREES.replace("<ResourceGroupName>NoMgmt</ResourceGroupName>",
                                   f"<ResourceGroupName>Nowhere</ResourceGroupName> {MARK}")
    groups = RESOURCE_GROUPS.replace("<ResourceRequirement>select(!mg) order(-maxmem)</ResourceRequirement>",
                                     "<ResourceRequirement>select(mem &gt;)</ResourceRequirement>")
    md = FULL["MDPlan.xml"].replace('<ResourceGroup name="NoMgmt" PreferenceLevel="2"',
                                    '<ResourceGroup name="ComputeHosts" PreferenceLevel="2"')
    d = write_ego(tmp_path / "ego", {**FULL, "ConsumerTrees.xml": trees, "ResourceGroups.xml": groups,
                                     "MDPlan.xml": md})
    problems = problems_of([d])
    text = "\n".join(problems)
    assert f"ConsumerTrees.xml:{line_of(trees)}: <ResourceGroupName>: unknown resource group 'Nowhere'" in text
    assert f"ResourceGroups.xml:{line_of(groups, 'select(mem')}: <ResourceRequirement>: 'select(mem >)'" in text
    md_line = line_of(md, 'name="ComputeHosts"')
    assert (f"MDPlan.xml:{md_line}: <ResourceGroup>: resource group 'ComputeHosts' "
            "is not one this DistributionTree plans") in text


def test_missing_and_unknown_files(tmp_path):
    d = write_ego(tmp_path / "ego", {"ResourceGroups.xml": RESOURCE_GROUPS})
    assert problems_of([d]) == [f"{d}: file: no ConsumerTrees.xml there"]
    other = write_ego(tmp_path / "x", {"plan.xml": "<a/>"}) / "plan.xml"
    assert "not an EGO file this importer reads" in problems_of([other])[0]
    assert problems_of([tmp_path / "nowhere"]) == [f"{tmp_path / 'nowhere'}: file: no such file or directory"]
    wrong_root = write_ego(tmp_path / "y", {**FULL, "ResourceGroups.xml": "<ResourceGroupz/>"})
    assert "the root element of ResourceGroups.xml is <ResourceGroups>, not <ResourceGroupz>" in \
        problems_of([wrong_root])[0]


# --- the shares EGO's documentation gives ----------------------------------------------------


SHARES_GROUPS = """\
<ResourceGroups xmlns="http://www.platform.com/ego/2005/05/schema">
  <ResourceGroup ResourceGroupName="RG1" availableSlots="6">
    <ResourceList><ResourceEntry>h1</ResourceEntry><ResourceEntry>h2</ResourceEntry><ResourceEntry>h3</ResourceEntry></ResourceList>
  </ResourceGroup>
</ResourceGroups>
"""


def shares_trees() -> str:
    consumers = "\n".join(
        f'<Consumer ConsumerName="{name}"><DistributionPolicies><SharingPolicy><Shares type="ratio">{ratio}</Shares>'
        "</SharingPolicy></DistributionPolicies></Consumer>" for name, ratio in (("A", 1), ("B", 2), ("C", 3)))
    return f"""<ConsumerTrees xmlns="http://www.platform.com/ego/2005/05/schema">
  <ConsumerHierarchy><Consumer ConsumerName="A"/><Consumer ConsumerName="B"/><Consumer ConsumerName="C"/></ConsumerHierarchy>
  <DistributionTree DistributionTreeName="RG1"><ResourceGroupName>RG1</ResourceGroupName>
{consumers}
  </DistributionTree>
</ConsumerTrees>
"""


def test_apportion_solve_gives_the_shares_egos_documentation_gives(tmp_path):
    """IBM's "Using Static Share Quota to Minimize Reclaims": consumers A, B, C with share ratio 1:2:3 and
    one resource group of 18 slots. "If A and B have workload, the dynamic share quota for each consumer will
    be A=6 slots and B=12 slots"; with all three, the quota is A=3, B=6, C=9."""
    d = write_ego(tmp_path / "ego", {"ResourceGroups.xml": SHARES_GROUPS, "ConsumerTrees.xml": shares_trees()})
    plan_file = tmp_path / "plan.yaml"
    r = cli("import", "ego", str(d), "-o", str(plan_file))
    assert r.returncode == 0, r.stderr
    scenario = yaml.safe_load(plan_file.read_text())
    scenario["timeline"] = [
        {"at": 0, "requests": [{"id": "a", "consumer": "/A", "max": 18}, {"id": "b", "consumer": "/B", "max": 18}]},
        {"at": 10, "requests": [{"id": "c", "consumer": "/C", "max": 18}]},
        {"at": 20, "release": ["c"]},
    ]
    scenario["consumers"] = [{**c, "grace": 0} for c in scenario["consumers"]]
    scenario_file = tmp_path / "scenario.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario, sort_keys=False))
    solved = apportion("solve", str(scenario_file), "--json")
    assert solved.returncode == 0, solved.stderr
    held = [{path: c["held"] for path, c in s["consumers"].items()} for s in json.loads(solved.stdout)["snapshots"]]
    assert held[0] == {"/A": 6, "/B": 12, "/C": 0}
    assert held[1] == {"/A": 3, "/B": 6, "/C": 9}
    assert held[2] == {"/A": 6, "/B": 12, "/C": 0}


# --- export, and the round trip --------------------------------------------------------------


def test_export_writes_the_files_import_reads_back_to_the_same_plan(tmp_path):
    d = write_ego(tmp_path / "ego", FULL)
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(import_ego([d]).plan, sort_keys=False))
    out = tmp_path / "exported"
    r = cli("export", "ego", str(plan_file), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["ConsumerTrees.xml", "MDPlan.xml", "ResourceGroups.xml",
                                                     "hosts.yaml"]
    assert "note" not in r.stderr  # everything this plan says, the files hold
    again = import_ego([out])
    assert again.plan == FULL_PLAN
    assert again.notes == []
    assert compile_plan(again.plan) == load_plan(plan_file)


def test_export_says_what_the_files_cannot_hold(tmp_path):
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump({
        "hosts": [{"name": "h[1-2]", "slots": 4}],
        "resource_groups": [{"name": "RG", "hosts": ["h[1-2]"], "allocation_policy": "balanced"}],
        "policy": {"share_enforcement": "parent"},
        "consumers": [{"path": "/B"}, {"path": "/A", "max": 6, "owned": 2, "lend": True, "lend_to": "siblings",
                       "borrow_preference": ["/B/x"]},
                      {"path": "/B/x"}],
    }))
    result = export_ego(plan_file)
    fields = sorted(n.field for n in result.notes)
    assert fields == ["consumers", "consumers[1] (/A) in RG.borrow_preference", "consumers[1] (/A) in RG.lend_to",
                      "policy.share_enforcement", "resource_groups[0].allocation_policy"]
    assert all(n.reason.startswith("not carried: ") for n in result.notes)
    write_files(result, tmp_path / "out")
    back = compile_plan(import_ego([tmp_path / "out"]).plan)
    assert back.consumer_map()["/A"].groups["RG"].owned == 2  # the rest still comes through
    assert back.consumer_map()["/A"].groups["RG"].max == 6
    r = cli("export", "ego", str(plan_file), "-o", str(tmp_path / "out2"))
    assert r.returncode == 0 and "not carried: the lenders to borrow from first" in r.stderr


def test_export_of_a_bad_plan_names_its_problems(tmp_path):
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("consumers:\n  - {path: /A, onwed: 3}\n")
    r = cli("export", "ego", str(plan_file), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and f"{plan_file}:2: consumers[0].onwed" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("policies", "field", "reason"), [
    (f'<SharingPolicy EnforceSiblingShareReclaim="Y"> {MARK}\n<Shares type="ratio">2</Shares></SharingPolicy>',
     "<SharingPolicy> EnforceSiblingShareReclaim", "not carried: the plan's policy.share_enforcement"),
    (f'<SharingPolicy><Shares type="percentage">20</Shares> {MARK}\n</SharingPolicy>', "<Shares>",
     "not carried: shares of type 'percentage'"),
    (f'<Sharing><Shares>1</Shares><Limit type="dimension"> {MARK}\n<ncpus type="absolute">5</ncpus></Limit></Sharing>',
     "<Limit>", "not carried: limits per dimension"),
    (f'<Ownership type="percentage">10</Ownership> {MARK}', "<Ownership>", "not carried: ownership of type"),
])
def test_what_is_not_carried_is_said_with_its_line(tmp_path, policies, field, reason):
    trees = trees_with(policies)
    d = write_ego(tmp_path / "ego", {**FULL, "ConsumerTrees.xml": trees, "MDPlan.xml": "<DistributionTree>"
                                     "<ResourceGroupName>GPUHosts</ResourceGroupName></DistributionTree>"})
    result = import_ego([d])
    assert [c["path"] for c in result.plan["consumers"]] == ["/A"]
    notes = [str(n) for n in result.notes]
    assert any(n.startswith(f"{d / 'ConsumerTrees.xml'}:{line_of(trees)}: {field}: {reason}") for n in notes), notes


def test_a_consumer_outside_the_hierarchy_and_values_that_disagree(tmp_path):
    trees = CONSUMER_TREES.replace('<Consumer ConsumerName="LOB2"/>',
                                   f'<Consumer ConsumerName="LOB2"/><Consumer ConsumerName="Ghost"/> {MARK}')
    md = FULL["MDPlan.xml"].replace(
        '<ResourceGroup name="GPUHosts" GetFreeFromNextLevelBeforeReclaim="N">',
        '<ResourceGroup name="GPUHosts" GetFreeFromNextLevelBeforeReclaim="Y">')
    d = write_ego(tmp_path / "ego", {**FULL, "ConsumerTrees.xml": trees, "MDPlan.xml": md})
    result = import_ego([d])
    notes = [str(n) for n in result.notes]
    assert f"{d / 'ConsumerTrees.xml'}:{line_of(trees)}: <Consumer>: not carried: consumer /Ghost is not in the " \
           "ConsumerHierarchy" in "\n".join(notes)
    assert "policy" not in result.plan  # Y for one consumer, N for the other: the plan-wide default stays
    assert sum("GetFreeFromNextLevelBeforeReclaim differs" in n for n in notes) == 4
    # one setting from both files for one consumer and group: the MDPlan.xml one is kept, and said
    trees2 = CONSUMER_TREES.replace(
        '<Consumer ConsumerName="LOB1">\n      <Consumer ConsumerName="app1"/>',
        f'<Consumer ConsumerName="LOB1"><DistributionPolicies><SharingPolicy><Shares type="ratio">7</Shares> {MARK}\n'
        '</SharingPolicy></DistributionPolicies>\n      <Consumer ConsumerName="app1"/>')
    d2 = write_ego(tmp_path / "ego2", {**FULL, "ConsumerTrees.xml": trees2})
    result = import_ego([d2])
    assert result.plan["consumers"][0]["groups"]["GPUHosts"]["share_ratio"] == 4
    said = [n for n in result.notes if "share_ratio 4 here, 7 at" in n.reason]
    assert len(said) == 2 and said[0].file.endswith("MDPlan.xml")  # GPUHosts and NoMgmt
    assert f"ConsumerTrees.xml:{line_of(trees2)}; MDPlan.xml value is kept" in said[0].reason


def test_several_trees_in_mdplan_and_a_bad_hosts_file(tmp_path):
    tree = FULL["MDPlan.xml"].split("\n", 1)[1]  # without the XML declaration
    wrapped = f"<MDPlan>\n{tree}<Other/>\n</MDPlan>\n"
    d = write_ego(tmp_path / "ego", {**FULL, "MDPlan.xml": wrapped})
    result = import_ego([d])
    assert result.plan == FULL_PLAN
    assert any(n.field == "<Other>" and "unknown element in <MDPlan>" in n.reason for n in result.notes)
    bad = write_ego(tmp_path / "ego2", {**FULL, "hosts.yaml": "hosts:\n  - {name: c1, slots: -4}\n"})
    assert any(p.startswith(f"{bad / 'hosts.yaml'}:2: hosts[0].slots") for p in problems_of([bad]))
