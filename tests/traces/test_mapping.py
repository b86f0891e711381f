"""The mapping file: first match wins, globs, default, checkpoints, validation; generate()."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from apportion.plan.errors import PlanError
from apportion.traces import TraceJob, generate, load_mapping, open_trace, render_map, render_plan
from apportion.traces.mapping import Mapping, Rule, consumer_name, mapping_from_data

from .conftest import write

CONTRACT = """\
default: /Other                             # where a job no rule matches goes
rules:                                      # first match wins; values are exact or glob patterns
  - {user: "12", consumer: /Teams/a}
  - {group: "3*", consumer: /Teams/b}
  - {queue: "2", partition: "*", consumer: /Batch}
"""


def job(user="", group="", queue="", partition="", resource="cpu", checkpoint=None):
    return TraceJob("j", 0.0, 1.0, 1, user, group, queue, partition, resource, checkpoint=checkpoint)


def test_the_contract_example(tmp_path):
    m = load_mapping(write(tmp_path / "map.yaml", CONTRACT))
    assert m.consumer_of(job(user="12", group="31")) == "/Teams/a"  # first match wins
    assert m.consumer_of(job(user="120", group="31")) == "/Teams/b"  # exact is exact; 3* is a glob
    assert m.consumer_of(job(group="3")) == "/Teams/b"
    assert m.consumer_of(job(group="13", queue="2", partition="")) == "/Batch"  # * matches ""
    assert m.consumer_of(job(group="13", queue="20")) == "/Other"
    assert [r.line for r in m.rules] == [3, 4, 5]


def test_globs_numbers_resource_and_cache():
    m = mapping_from_data({"default": "/D", "rules": [
        {"user": "a?c", "consumer": "/Q"},
        {"queue": 2, "consumer": "/Two"},  # a number is its text
        {"resource": "gpu", "partition": "V100*", "consumer": "/Gpu/v100"},
        {"partition": "[[]x]", "consumer": "/Bracket"},  # an escaped glob character
    ]}, "m.yaml")
    assert m.consumer_of(job(user="abc")) == "/Q" and m.consumer_of(job(user="abbc")) == "/D"
    assert m.consumer_of(job(queue="2")) == "/Two"
    assert m.consumer_of(job(partition="V100M32", resource="gpu")) == "/Gpu/v100"
    assert m.consumer_of(job(partition="V100M32")) == "/D"
    assert m.consumer_of(job(partition="[x]")) == "/Bracket"
    assert len(m._cache) == 6  # one entry per distinct (user, group, queue, partition, resource)
    m.consumer_of(job(user="abc"))
    assert len(m._cache) == 6


def test_checkpoints_from_trace_rule_and_top():
    m = mapping_from_data({"checkpoint": 3600, "rules": [
        {"user": "a", "consumer": "/A", "checkpoint": 60}, {"user": "b", "consumer": "/B"}]}, "m.yaml")
    assert m.default == "/Other"
    assert m.resolve(job(user="a")) == ("/A", 60.0)
    assert m.resolve(job(user="b")) == ("/B", 3600.0)
    assert m.resolve(job(user="a", checkpoint=5.0)) == ("/A", 5.0)  # the trace's own wins
    assert mapping_from_data({}, "m").resolve(job()) == ("/Other", None)


def test_every_problem_with_file_line_and_field(tmp_path):
    path = write(tmp_path / "map.yaml", """\
default: Other
checkpoint: -5
colour: red
rules:
  - {user: "12"}
  - {usr: "1", consumer: /A}
  - {group: "3", consumer: /9lives}
  - {consumer: /All}
  - {resource: tpu, consumer: /T}
  - {queue: [1, 2], consumer: /Q}
  - just text
""")
    with pytest.raises(PlanError) as caught:
        load_mapping(path)
    lines = [str(p).replace(str(path), "F") for p in caught.value.problems]
    assert lines == [
        "F:3: colour: unknown key; known: default, checkpoint, rules",
        "F:1: default: 'Other' must be a slash path from the root, like /LOB1/app1",
        "F:2: checkpoint: must be a number of seconds above 0 (got -5)",
        "F:5: rules[0]: a rule needs a consumer",
        "F:6: rules[1].usr: unknown key; a rule has user, group, queue, partition, resource, consumer, checkpoint",
        "F:7: rules[2].consumer: '9lives' is not a valid consumer name: start with a letter, then use letters, "
        "digits, '_' or '-' (at most 128 characters)",
        "F:8: rules[3]: a rule must match at least one of user, group, queue, partition, resource; "
        "use default for every other job",
        "F:9: rules[4].resource: 'tpu' is not one of cpu, gpu",
        "F:10: rules[5].queue: must be text, exact or a glob pattern (got [1, 2])",
        "F:11: rules[6]: a rule is a mapping like {user: \"12\", consumer: /Teams/a}",
    ]


def test_unreadable_files(tmp_path):
    with pytest.raises(PlanError, match=r"map.yaml:3: yaml: .*flow mapping at line 2"):
        load_mapping(write(tmp_path / "map.yaml", "rules:\n  - {user: 1\n"))
    with pytest.raises(PlanError, match="empty"):
        load_mapping(write(tmp_path / "empty.yaml", "# nothing\n"))
    with pytest.raises(PlanError, match="a mapping file is a mapping"):
        load_mapping(write(tmp_path / "list.yaml", "- 1\n"))
    with pytest.raises(PlanError, match="unknown file type"):
        load_mapping(write(tmp_path / "map.txt", "default: /A\n"))


SWF = """; MaxNodes: 4
; MaxProcs: 10
; Partition: 1 short jobs
1 0 -1 10 1 -1 -1 1 -1 -1 1 12 3 -1 1 1 -1 -1
2 1 -1 10 1 -1 -1 1 -1 -1 1 7 3 -1 1 2 -1 -1
3 2 -1 10 1 -1 -1 1 -1 -1 1 7 10 -1 1 1 -1 -1
4 3 -1 10 1 -1 -1 1 -1 -1 1 7 -1 -1 1 1 -1 -1
"""


def test_generate_by_group_and_render(tmp_path):
    trace = open_trace(write(tmp_path / "t.swf", SWF))
    mapping, plan = generate(trace, by="group")
    assert mapping.rules == (Rule((("group", "3"),), "/g3"), Rule((("group", "10"),), "/g10"))
    assert mapping.default == "/Other"
    assert plan == {
        # 10 processors on 4 hosts: 2 hosts of 3 and 2 of 2
        "hosts": [{"name": "n[1-2]", "slots": 3}, {"name": "n[3-4]", "slots": 2}],
        "resource_groups": [{"name": "cpu", "hosts": ["n[1-2]", "n[3-4]"]}],
        # job 4 has no group: it goes to the default, which the plan then needs
        "consumers": [{"path": "/g3", "share_ratio": 1}, {"path": "/g10", "share_ratio": 1},
                      {"path": "/Other", "share_ratio": 1}],
    }
    text = render_map(mapping, "generated for a test")
    assert text.startswith("# generated for a test\ndefault: /Other\nrules:\n  - {group: \"3\", consumer: /g3}\n")
    assert load_mapping(write(tmp_path / "m.yaml", text)) == mapping
    assert yaml.safe_load(render_plan(plan)) == plan
    assert [mapping.consumer_of(j) for j in trace.jobs()] == ["/g3", "/g3", "/g10", "/Other"]


def test_generate_by_partition_uses_header_names_under_a_prefix(tmp_path):
    trace = open_trace(write(tmp_path / "t.swf", SWF))
    mapping, plan = generate(trace, by="partition", prefix="/Curie")
    assert [r.consumer for r in mapping.rules] == ["/Curie/short_jobs", "/Curie/p2"]
    assert plan["consumers"][0] == {"path": "/Curie"}
    with pytest.raises(ValueError, match="--by must be one of"):
        generate(trace, by="colour")
    with pytest.raises(ValueError, match="prefix: "):
        generate(trace, prefix="/9")


def test_generate_from_machines_folds_ranges_and_adds_gpus(tmp_path):
    write(tmp_path / "node_list.csv", "sn,cpu_milli,memory_mib,gpu,model\n"
          "node-01,32000,1024,0,\nnode-02,32000,1024,0,\nnode-03,96000,2048,8,V100\nnode-04,96000,2048,8,V100\n")
    pods = write(tmp_path / "pod_list.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                 "creation_time,deletion_time,scheduled_time\np1,1000,10,1,1000,,LS,Running,0,10,0\n"
                 "p2,1000,10,0,0,,BE,Running,1,10,1\n")
    mapping, plan = generate(open_trace(pods), by="queue")
    assert [r.consumer for r in mapping.rules] == ["/BE", "/LS"]
    assert plan["hosts"] == [
        {"name": "node-[01-02]", "slots": 32, "memory": 1.0},
        {"name": "node-[03-04]", "slots": 96, "memory": 2.0},
        {"name": "node-[03-04]-gpu", "slots": 8, "attributes": {"gpu": True}},
    ]
    assert plan["resource_groups"] == [{"name": "cpu", "hosts": ["node-[01-02]", "node-[03-04]"]},
                                       {"name": "gpu", "hosts": ["node-[03-04]-gpu"]}]


@pytest.mark.parametrize(("by", "value", "names", "expected"), [
    ("group", "3", None, "g3"), ("user", "-1", None, "u-1"), ("user", "RyCO/1PC+a=", None, "RyCO_1PC_a"),
    ("partition", "7", {"7": "test,batch"}, "test_batch"), ("queue", "==", None, "q"),
])
def test_consumer_names_are_valid(by, value, names, expected):
    assert consumer_name(by, value, names) == expected


def test_generated_names_that_collide_get_numbers():
    from apportion.traces.record import TraceInfo

    class Two:
        info = TraceInfo("x", "x", partitions={"1": "UNKNOWN", "2": "UNKNOWN"})

        def jobs(self):
            return iter([job(partition="1"), job(partition="2")])

    mapping, _ = generate(Two(), by="partition")
    assert [r.consumer for r in mapping.rules] == ["/UNKNOWN", "/UNKNOWN-2"]
    assert isinstance(mapping, Mapping)


def test_host_ranges_fold_only_what_expands_back():
    from apportion.plan.hostnames import expand_hosts
    from apportion.traces.mapping import _ranges

    names = ["n8", "n9", "n10", "n11", "x01", "x02", "x03", "x05", "n099", "n100", "solo", "s-9", "s-10"]
    folded = _ranges(names)
    assert folded == ["n[8-11]", "x[01-03]", "x05", "n[099-100]", "solo", "s-[9-10]"]
    assert [h for pattern in folded for h in expand_hosts(pattern)] == names


values = st.sampled_from(["", "1", "12", "3", "31", "a", "ab"])
patterns = st.sampled_from(["1", "12", "3*", "*", "?", "a*", "[13]", ""])
rules = st.lists(st.dictionaries(st.sampled_from(["user", "group", "queue", "partition"]), patterns, min_size=1),
                 max_size=5)


@given(rules, st.lists(st.tuples(values, values, values, values), max_size=20))
def test_first_matching_rule_wins_and_the_cache_agrees(rule_list, keys):
    import fnmatch

    data = {"default": "/D", "rules": [{**r, "consumer": f"/R{i}"} for i, r in enumerate(rule_list)]}
    mapping = mapping_from_data(data, "m.yaml")
    for user, group, queue, partition in keys + keys:  # twice: the second time from the cache
        values_ = {"user": user, "group": group, "queue": queue, "partition": partition}
        expected = next((f"/R{i}" for i, r in enumerate(rule_list)
                         if all(fnmatch.fnmatchcase(values_[k], p) for k, p in r.items())), "/D")
        assert mapping.consumer_of(job(user, group, queue, partition)) == expected
