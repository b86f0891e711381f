"""Cycles skipped because they would decide nothing (Engine(skip_quiet=True)) and
slots given and taken back within a cycle counted without allocations
(Cycle._hold_back): the decisions, reports and books are those of the plain engine."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import Engine, Host, Policy, Request

from .builders import make_plan
from .test_properties import check_invariants, plans


def _books(e: Engine) -> dict:
    s = e.state
    # allocation ids are left out: a cycle not run uses none up for slots it would have
    # given and taken back; what is kept is their order
    return {"allocs": [(a.request, a.host, a.slots, a.source, a.reclaim is not None)
                       for a in sorted(s.allocs.values(), key=lambda a: a.id)],
            "free": {n: h.free for n, h in s.hosts.items()},
            "unmet": {k: v for k, v in s.unmet.items() if v},
            "report": e.report()}


@st.composite
def steps(draw, plan):
    """Batches of events, each followed by one cycle (as the simulator drives it):
    rigid and elastic requests arrive; running ones end; now and then a later tick."""
    leaves = [c.path for c in plan.consumers if c.is_leaf]
    out = []
    for k in range(draw(st.integers(1, 25))):
        batch = []
        for j in range(draw(st.integers(0, 3))):
            n = draw(st.integers(1, 12))
            rigid = draw(st.booleans())
            batch.append(("submit", f"r{k}.{j}", draw(st.sampled_from(leaves)), n, n if rigid else 1))
        if draw(st.booleans()):
            batch.append(("end", draw(st.integers(0, 1000))))
        out.append((draw(st.sampled_from([0.0, 1.0, 1.0, 7.0])), batch))
    return out


def _run(plan, script, skip: bool):
    e = Engine(plan, skip_quiet=skip)
    seq = 0
    t = 0.0
    log = []
    for dt, batch in script:
        t += dt
        for ev in batch:
            if ev[0] == "submit":
                e.submit(Request(ev[1], ev[2], max=ev[3], min=ev[4], seq=seq, groups=ev[5] if len(ev) > 5 else (),
                                 order=ev[6] if len(ev) > 6 else 1))
                seq += 1
            else:
                full = sorted(rid for rid, rs in e.state.requests.items() if rs.held >= rs.max > 0)
                if full:
                    e.release(full[ev[1] % len(full)])
        d = e.cycle(t)
        log.append((d.grants, d.reclaims, d.removals, d.lost, d.cancelled, d.retagged))
        if skip:
            check_invariants(e)
        log.append(_books(e))
    return log, e


def _both_ways(plan, script):
    """Run ``script`` on an engine that runs every cycle and on one that skips quiet
    ones; assert they decide the same; the second engine's log and the engine."""
    plain, _ = _run(plan, script, skip=False)
    quiet, e = _run(plan, script, skip=True)
    assert plain == quiet
    return quiet, e


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_skipping_quiet_cycles_decides_the_same(data):
    plan = data.draw(plans())
    script = data.draw(steps(plan))
    _both_ways(plan, script)


def test_a_queue_behind_a_blocked_rigid_job_skips_cycles_and_decides_the_same():
    # /a holds most of the cluster (and keeps it: no reclaim for fairness); /b's first
    # job (rigid, 10 slots) cannot start, and jobs queued behind it change nothing
    # until /a's work ends
    plan = make_plan({"/a": {"share_ratio": 1}, "/b": {"share_ratio": 1}}, hosts=2, slots=6,
                     policy=Policy(share_pool_reclaim=False))
    script = [(0.0, [("submit", "a1", "/a", 10, 10)]), (1.0, [("submit", "b1", "/b", 10, 10)])]
    script += [(1.0, [("submit", f"b{i}", "/b", 1, 1)]) for i in range(2, 8)]
    script += [(1.0, [("end", 0)]), (1.0, [])]
    quiet, e = _both_ways(plan, script)
    assert e.skipped >= 5  # b2..b7 arrived behind b1 and changed nothing
    granted = {g.request for step in quiet[::2] for g in step[0]}
    assert {"a1", "b1"} <= granted  # and b1 started once a1 was done


@st.composite
def two_group_cases(draw):
    """Two groups over their own hosts; leaves planned in one or both; requests for a
    group, or for any of their leaf's (in preference order)."""
    n_leaves = draw(st.integers(1, 4))
    cons = {}
    for i in range(n_leaves):
        only = draw(st.sampled_from([None, ("A",), ("B",)]))
        cons[f"/l{i}"] = {"share_ratio": draw(st.integers(1, 3)), "owned": draw(st.integers(0, 3)),
                          **({"only": only} if only else {})}
    plan = make_plan(cons, host_list=[Host(f"h{i}", draw(st.integers(1, 6))) for i in range(4)],
                     groups={"A": ["h0", "h1"], "B": ["h2", "h3"]},
                     policy=Policy(share_pool_reclaim=draw(st.booleans())))
    script = []
    for k in range(draw(st.integers(1, 20))):
        batch = []
        for j in range(draw(st.integers(0, 3))):
            leaf = draw(st.sampled_from(sorted(cons)))
            n = draw(st.integers(1, 8))
            groups = draw(st.sampled_from([(), ("A",), ("B",)]))
            batch.append(("submit", f"r{k}.{j}", leaf, n, n if draw(st.booleans()) else 1, groups))
        if draw(st.booleans()):
            batch.append(("end", draw(st.integers(0, 1000))))
        script.append((draw(st.sampled_from([0.0, 1.0, 3.0])), batch))
    return plan, script


@settings(max_examples=200, deadline=None)
@given(two_group_cases())
def test_skipping_quiet_cycles_in_two_groups_decides_the_same(case):
    plan, script = case
    _both_ways(plan, script)


def _books_in_order(e: Engine) -> dict:
    """Every book with its ids and in its order: what the next cycles walk."""
    s = e.state
    return {"allocs": [(a.id, a.request, a.host, a.slots, a.source,
                        a.reclaim and (a.reclaim.deadline, a.reclaim.beneficiary, a.reclaim.reason))
                       for a in s.allocs.values()],
            "by_host": {h: list(d) for h, d in s.by_host.items()},
            "by_source": {k: list(d) for k, d in s.by_source.items() if d},
            "requests": {rid: list(rs.allocs) for rid, rs in s.requests.items()},
            "next_id": s._next_id}


def _run_held(plan, script, hold_back: bool, monkeypatch):
    from apportion.engine.cycle import Cycle

    monkeypatch.setattr(Cycle, "hold_back", hold_back)
    log, e = _run(plan, script, skip=False)
    return log, _books_in_order(e)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_slots_held_back_decide_as_allocations_would(data):
    """Grants to a request still below its min are counted, and made into allocations
    only when a later grant of the cycle may take it to its min (Cycle._hold_back,
    _materialise): the decisions and the books, ids and order included, are those of
    an engine that makes every grant an allocation at once."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        plan = data.draw(plans())
        script = data.draw(steps(plan))
        plain = _run_held(plan, script, False, mp)
        held = _run_held(plan, script, True, mp)
    assert plain == held


@settings(max_examples=150, deadline=None)
@given(two_group_cases())
def test_slots_held_back_decide_as_allocations_would_in_two_groups(case):
    import pytest

    plan, script = case
    with pytest.MonkeyPatch.context() as mp:
        plain = _run_held(plan, script, False, mp)
        held = _run_held(plan, script, True, mp)
    assert plain == held


def test_a_backlog_of_wide_rigid_jobs_is_held_back_by_the_short_path(monkeypatch):
    """Leaves whose first job is wider than their share are met every cycle
    (Cycle._hold_first): they take the short path, which decides as the plain engine
    does, and a leaf with room left after its first job goes on to the next one."""
    from apportion.engine.cycle import Cycle

    taken = []
    real = Cycle._hold_first

    def counting(self, leaf, *a):
        done = real(self, leaf, *a)
        if done:
            taken.append(leaf)
        return done

    plan = make_plan({"/a": {"share_ratio": 1}, "/b": {"share_ratio": 1}, "/c": {"share_ratio": 1}},
                     hosts=2, slots=6, policy=Policy(share_pool_reclaim=False))
    # /a and /b each want 10 of 12 slots at once (a rigid job each), far beyond their
    # share of 4. /a's, the first, has the reservation (engine/reserve.py) and starts at
    # once; /b's is held back by the short path with the 2 slots left, and has the
    # reservation next: it starts when /a's job ends
    script = [(0.0, [("submit", "a1", "/a", 10, 10), ("submit", "b1", "/b", 10, 10),
                     ("submit", "c1", "/c", 6, 6, (), 3), ("submit", "c2", "/c", 1, 1)]),
              (1.0, [("submit", "a2", "/a", 1, 1)]), (1.0, [("end", 0)]), (1.0, [])]
    monkeypatch.setattr(Cycle, "_hold_first", counting)
    held = _run_held(plan, script, True, monkeypatch)
    assert "/b" in taken
    plain = _run_held(plan, script, False, monkeypatch)
    assert plain == held
    granted = [{g.request for g in step[0]} for step in held[0][::2]]
    assert granted[0] == {"a1"} and granted[2] == {"b1", "a2", "c2"}


@st.composite
def plain_cases(draw):
    """The plainest plans (Cycle._plain_phase3): leaves under the root sharing one
    group by ratio; rigid and elastic requests of one slot an instance, now and then
    of two; work that ends; reclaims with and without grace."""
    cons = {f"/l{i}": {"share_ratio": draw(st.integers(0, 3)), "grace": draw(st.sampled_from([0.0, 2.0]))}
            for i in range(draw(st.integers(1, 5)))}
    plan = make_plan(cons, host_list=[Host(f"h{i}", draw(st.integers(1, 8))) for i in range(draw(st.integers(1, 3)))],
                     policy=Policy(share_pool_reclaim=draw(st.booleans()),
                                   adjust_share_to_workload=draw(st.booleans())))
    script = []
    for k in range(draw(st.integers(1, 25))):
        batch = []
        for j in range(draw(st.integers(0, 3))):
            n = draw(st.integers(1, 10))
            order = draw(st.sampled_from([1, 1, 1, 2]))
            n = max(order, n - n % order)
            lo = n if draw(st.booleans()) else order
            batch.append(("submit", f"r{k}.{j}", draw(st.sampled_from(sorted(cons))), n, lo, (), order))
        for _ in range(draw(st.integers(0, 2))):
            batch.append(("end", draw(st.integers(0, 1000))))
        script.append((draw(st.sampled_from([0.0, 1.0, 1.0, 3.0])), batch))
    return plan, script


@settings(max_examples=400, deadline=None)
@given(plain_cases())
def test_cycles_cut_short_decide_the_same(case):
    """A cycle whose phases after the views are certain to decide nothing ends there
    (Cycle._plain_phase3, with skip_quiet): every decision and book after every
    cycle is that of the plain engine."""
    plan, script = case
    _both_ways(plan, script)


def test_a_wide_job_waiting_behind_running_work_cuts_cycles_short():
    # /a runs most of the cluster; /b's rigid 8-slot job cannot start while /a holds
    # it (no reclaim for fairness). Ends of /a's smaller jobs free too little for it;
    # a1's end frees enough. Each cycle's phase 3 is worked out with sums and the
    # rest is not run (Cycle._plain_phase3), and the decisions are the plain engine's
    plan = make_plan({"/a": {"share_ratio": 1}, "/b": {"share_ratio": 1}}, hosts=2, slots=6,
                     policy=Policy(share_pool_reclaim=False))
    script = [(0.0, [("submit", "a1", "/a", 6, 6), ("submit", "a2", "/a", 2, 2), ("submit", "a3", "/a", 2, 2)]),
              (1.0, [("submit", "b1", "/b", 8, 8)])]
    # a2 ends, then a3 (the second of the running jobs in id order each time), then a1
    script += [(1.0, [("end", 1)]), (1.0, [("end", 1)]), (1.0, [("end", 0)]), (1.0, [])]
    quiet, e = _both_ways(plan, script)
    # all but the last cycle, where nothing is wanted: /a's grants, b1 waiting (3), b1's
    # start
    assert e.cut_short == 5
    granted = [[(g.request, g.host, g.slots) for g in step[0]] for step in quiet[::2]]
    assert granted[0] == [("a1", "h1", 6), ("a2", "h2", 2), ("a3", "h2", 2)]
    assert granted[1:4] == [[], [], []]
    assert granted[4] == [("b1", "h1", 6), ("b1", "h2", 2)]  # both hosts free by then
