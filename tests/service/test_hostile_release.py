"""Lowering an allocation's max gives back idle slots first (issue 18, "Why" 9): the old
engine gave back its newest slots even when processes ran on them and older ones were idle,
so running work was stopped ("reclaimed") for nothing."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import Engine, Request
from apportion.plan import compile_plan

PLAN = yaml.safe_load("""
hosts: [{name: h1, slots: 4}, {name: h2, slots: 4}, {name: h3, slots: 4}]
resource_groups: [{name: G, hosts: [h1, h2, h3]}]
consumers:
  - {path: /Apps}
""")


def held(e: Engine, rid: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in e.state.requests[rid].allocs.values():
        out[a.host] = out.get(a.host, 0) + a.slots
    return out


def granted(n: int) -> Engine:
    e = Engine(compile_plan(PLAN))
    e.state.changed = set()
    e.submit(Request("r", "/Apps", max=n))
    e.cycle(0)
    assert sum(held(e, "r").values()) == n
    return e


def test_the_newest_slots_stay_when_they_run_work_and_older_ones_are_idle():
    e = granted(12)
    newest = max(e.state.requests["r"].allocs.values(), key=lambda a: a.id)
    e.state.set_in_use("r", newest.host, held(e, "r")[newest.host])  # work on the newest host only
    e.change("r", max=4)
    assert held(e, "r") == {newest.host: 4}
    assert not e.state.fences, "running work lost its slots while idle ones were there"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.lists(st.integers(0, 4), min_size=3, max_size=3), st.integers(0, 12))
def test_idle_slots_go_first_and_busy_ones_only_when_there_are_not_enough(n, use, new_max):
    e = granted(n)
    before = held(e, "r")
    busy = {}
    for host, u in zip(("h1", "h2", "h3"), use, strict=True):
        if before.get(host):
            busy[host] = min(u, before[host])
            e.state.set_in_use("r", host, busy[host])
    idle = sum(before.values()) - sum(busy.values())
    e.change("r", max=new_max)
    after = held(e, "r")
    assert sum(after.values()) == min(n, new_max)
    excess = max(0, n - new_max)
    # exactly what idle slots could not cover is taken from running work (and fenced)
    assert sum(e.state.fences.values()) == max(0, excess - idle)
    if excess <= idle:
        for host, u in busy.items():
            assert after.get(host, 0) >= u
