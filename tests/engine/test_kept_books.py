"""Books the engine keeps as things move, instead of working them out when read: after
every cycle each agrees with a recount from the requests and their allocations."""

from __future__ import annotations

from hypothesis import given, settings

from apportion.engine import Plan, Request
from apportion.engine.phases.reclaim import _moved_keys
from apportion.engine.replan import rebuild
from apportion.engine.rigid import protected_held
from apportion.engine.state import ClusterState

from .builders import make_plan
from .test_rigid import _play, timed_cases


def _spared_by_hand(s: ClusterState, g: str, src: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for rid in s.protected:
        rs = s.requests.get(rid)
        if rs is None:
            continue
        n = sum(a.slots for a in rs.allocs.values() if a.group == g and a.source == src and a.reclaim is None)
        if n:
            out[rs.spec.consumer] = out.get(rs.spec.consumer, 0) + n
    return out


def check_books(s: ClusterState) -> None:
    sources = {(a.group, a.source) for a in s.allocs.values()}
    for g, src in sources:
        assert protected_held(s, g, src) == _spared_by_hand(s, g, src), (g, src)
    assert all(book for book in s.spared.values()), "an empty book of protected slots left"
    assert set(s.protected.linked) == {rid for rid in s.protected if rid in s.requests}
    for rid, rs in s.requests.items():
        per_group: dict[str, int] = {}
        for a in rs.allocs.values():
            if a.reclaim is None:
                per_group[a.group] = per_group.get(a.group, 0) + a.slots
        assert rs.unmarked_of == per_group, rid
        for g in s.group_names:
            assert rs.unmarked_in(g) == per_group.get(g, 0)
        assert (rs.spared is not None) == (rid in s.protected), rid
    assert s.wanting_some == {leaf: book for leaf, book in s.wanting_of.items() if book}


@settings(max_examples=150, deadline=None)
@given(timed_cases())
def test_kept_books_agree_with_a_recount_after_every_cycle(case):
    plan, script = case
    _play(plan, script, skip=False, after=lambda e: check_books(e.state))


def _state_with_two_jobs() -> ClusterState:
    plan: Plan = make_plan({"/A": {"share_ratio": 1}, "/B": {"share_ratio": 1}}, hosts=1, slots=8)
    s = ClusterState(plan)
    for rid, leaf in (("a", "/A"), ("b", "/B")):
        s.add_request(Request(rid, leaf, max=3, min=3))
        s.add(s.requests[rid], "RG", "h1", 3, "pool:/")
    return s


def test_protected_requests_join_and_leave_the_book_of_spared_slots():
    s = _state_with_two_jobs()
    g = s.group_names[0]
    assert protected_held(s, g, "pool:/") == {}
    s.protected.add("a")
    s.protected.add("a")
    assert protected_held(s, g, "pool:/") == {"/A": 3}
    s.protected |= {"b", "gone"}  # an id with no open request counts nothing
    assert protected_held(s, g, "pool:/") == {"/A": 3, "/B": 3}
    s.protected -= {"b"}
    assert protected_held(s, g, "pool:/") == {"/A": 3}
    s.close_request("a")
    assert protected_held(s, g, "pool:/") == {} and s.spared == {}
    s.protected = {"b"}  # a new set (engine/replan.py) is kept the same way
    assert protected_held(s, g, "pool:/") == {"/B": 3}
    s.protected.clear()
    assert s.spared == {} and s.requests["b"].spared is None


def test_a_protected_id_counts_from_when_its_request_opens():
    s = _state_with_two_jobs()
    g = s.group_names[0]
    s.protected.add("c")
    s.add_request(Request("c", "/A", max=2, min=2))
    s.add(s.requests["c"], g, "h1", 2, "pool:/")
    assert protected_held(s, g, "pool:/") == {"/A": 2}


def test_a_replanned_state_keeps_its_protected_slots():
    s = _state_with_two_jobs()
    g = s.group_names[0]
    s.protected.add("b")
    new = rebuild(s, s.plan).state
    assert protected_held(new, g, "pool:/") == {"/B": 3}
    check_books(new)


def test_the_leaves_whose_excess_inputs_moved():
    memo = ({"/a": 1, "/b": 2}, None, None, {})
    assert _moved_keys(memo, {"/a": 1, "/b": 2}, None, None) == set()
    assert _moved_keys(memo, {"/a": 1, "/b": 3, "/c": 1}, None, {"/d": 2}) == {"/b", "/c", "/d"}
    assert _moved_keys(memo, {"/b": 2}, None, None) == {"/a"}
    assert _moved_keys(memo, {"/a": 1, "/b": 2}, {"/a": 1}, None) is None  # static shares appear
