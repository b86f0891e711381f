"""The seeded synthetic trace for the large simulate bench."""

from __future__ import annotations

import pytest

from apportion.traces import open_trace, write_jsonl
from apportion.traces.synthetic import SyntheticSpec, SyntheticTrace, parse_spec, synthetic_mapping


def test_same_seed_same_jobs_in_submit_order():
    spec = SyntheticSpec(jobs=2000, consumers=7, hosts=20, slots_per_host=4, seed=5)
    first = list(SyntheticTrace(spec).jobs())
    assert first == list(SyntheticTrace(spec).jobs())
    assert first != list(SyntheticTrace(SyntheticSpec(jobs=2000, consumers=7, hosts=20, slots_per_host=4,
                                                      seed=6)).jobs())
    assert len(first) == 2000 and len({j.id for j in first}) == 2000
    assert all(a.submit <= b.submit for a, b in zip(first, first[1:], strict=False))
    assert {j.group for j in first} == {f"g{i}" for i in range(7)}
    assert all(1 <= j.slots <= 32 and j.slots & (j.slots - 1) == 0 and j.run >= 1 for j in first)


def test_offered_load_is_what_was_asked():
    trace = SyntheticTrace(jobs=40_000, consumers=10, hosts=50, slots_per_host=8, load=0.7, mean_run=600)
    jobs = list(trace.jobs())
    offered = sum(j.slots * j.run for j in jobs) / (jobs[-1].submit * trace.info.processors)
    assert offered == pytest.approx(0.7, rel=0.05)


def test_skew_favours_the_first_consumers_and_mapping_covers_all():
    jobs = list(SyntheticTrace(jobs=5000, consumers=4, hosts=10, skew=1.0).jobs())
    counts = [sum(j.group == f"g{i}" for j in jobs) for i in range(4)]
    assert counts == sorted(counts, reverse=True)  # weights 1, 1/2, 1/3, 1/4
    mapping = synthetic_mapping(4, "/Bench")
    assert {mapping.consumer_of(j) for j in jobs} == {f"/Bench/g{i}" for i in range(4)}


def test_open_by_spec_and_write(tmp_path):
    trace = open_trace("synthetic:jobs=50,consumers=3,hosts=4,slots_per_host=2,seed=9")
    assert (trace.info.hosts, trace.info.processors) == (4, 8)
    path = tmp_path / "syn.jsonl.gz"
    assert write_jsonl(path, trace.jobs(), trace.info) == 50
    again = open_trace(path)
    assert list(again.jobs()) == list(trace.jobs()) and again.info.processors == 8


@pytest.mark.parametrize(("text", "message"), [
    ("synthetic:jobs=2.5", "jobs: '2.5' is not a whole number"),
    ("synthetic:colour=2", "expected NAME=VALUE"),
    ("synthetic:hosts=0", "hosts must be at least 1"),
    ("synthetic:load=x", "load: 'x' is not a number"),
])
def test_bad_specs(text, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(text)
