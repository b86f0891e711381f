"""Invariants of the engine under random plans and event sequences (hypothesis)."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from apportion.engine import Engine, Host, HostState, Policy, Request, ShareEnforcement
from apportion.scenario.runner import advance, settle

from .builders import make_plan


@st.composite
def plans(draw):
    n_hosts = draw(st.integers(1, 6))
    hosts = [Host(f"h{i}", draw(st.integers(1, 8))) for i in range(n_hosts)]
    capacity = sum(h.slots for h in hosts)
    cons: dict[str, dict] = {}

    def settings_for(budget: int, leaf: bool) -> dict:
        owned = draw(st.integers(0, max(0, budget)))
        s = {"owned": owned, "share_ratio": draw(st.integers(0, 3)),
             "rank": draw(st.one_of(st.none(), st.integers(1, 3))),
             "priority": draw(st.one_of(st.none(), st.integers(1, 2))),
             "grace": float(draw(st.sampled_from([0, 0, 5, 20])))}
        if draw(st.booleans()):
            s["max"] = owned + draw(st.integers(0, 10))
        if leaf:
            s["lend"] = draw(st.booleans())
            if s["lend"] and draw(st.booleans()):
                s["lend_limit"] = draw(st.integers(0, owned))
            s["borrow"] = draw(st.booleans())
            if draw(st.booleans()):
                s["borrow_limit"] = draw(st.integers(0, 6))
        return s

    budget = capacity + draw(st.integers(0, 6))  # top level may overallocate
    for i in range(draw(st.integers(1, 3))):
        top = f"/T{i}"
        kids = draw(st.integers(0, 3))
        s = settings_for(budget // 2, leaf=kids == 0)
        budget -= s["owned"]
        cons[top] = s
        left = s["owned"]
        for j in range(kids):
            ks = settings_for(left // 2, leaf=True)
            left -= ks["owned"]
            cons[f"{top}/c{j}"] = ks
    policy = Policy(
        share_enforcement=draw(st.sampled_from(list(ShareEnforcement))),
        adjust_share_to_workload=draw(st.booleans()),
        reclaim_before_borrow=draw(st.booleans()),
        share_pool_reclaim=draw(st.booleans()),
    )
    if policy.adjust_share_to_workload and draw(st.booleans()):
        policy = dataclasses.replace(policy, base_quota=True)
    return make_plan(cons, host_list=hosts, policy=policy)


@st.composite
def scenarios(draw):
    plan = draw(plans())
    leaves = [c.path for c in plan.consumers if c.is_leaf]
    hosts = [h.name for h in plan.hosts]
    events = []
    t = 0.0
    open_ids: list[str] = []
    for k in range(draw(st.integers(1, 12))):
        t += draw(st.sampled_from([0, 0, 1, 5, 30]))
        kind = draw(st.sampled_from(["submit", "submit", "submit", "change", "release", "down", "up"]))
        if kind == "submit" or not open_ids and kind in ("change", "release"):
            rid = f"r{k}"
            events.append((t, "submit", rid, draw(st.sampled_from(leaves)), draw(st.integers(1, 20))))
            open_ids.append(rid)
        elif kind == "change":
            events.append((t, "change", draw(st.sampled_from(open_ids)), draw(st.integers(0, 20))))
        elif kind == "release":
            rid = draw(st.sampled_from(open_ids))
            open_ids.remove(rid)
            events.append((t, "release", rid))
        else:
            events.append((t, kind, draw(st.sampled_from(hosts))))
    return plan, events


def play(plan, events, check=None):
    e = Engine(plan)
    decisions = []
    seq = 0
    for ev in events:
        t = ev[0]
        decisions += advance(e, t)
        if ev[1] == "submit":
            e.submit(Request(ev[2], ev[3], max=ev[4], seq=seq))
            seq += 1
        elif ev[1] == "change":
            e.change(ev[2], max=ev[3])
        elif ev[1] == "release":
            e.release(ev[2])
        elif ev[1] == "down":
            e.set_host_state(ev[2], HostState.DOWN)
        else:
            e.set_host_state(ev[2], HostState.OK)
        decisions += settle(e, t)
        if check:
            check(e)
    decisions += advance(e, 1e9)
    if check:
        check(e)
    return e, decisions


def check_invariants(e: Engine) -> None:
    s = e.state
    per_host: dict[str, int] = {}
    for a in s.allocs.values():
        per_host[a.host] = per_host.get(a.host, 0) + a.slots
        assert s.hosts[a.host].state is not HostState.DOWN, "allocation left on a down host"
    for name, used in per_host.items():
        assert used <= s.hosts[name].host.slots, f"{name} over capacity"
    for name, h in s.hosts.items():
        assert h.free == h.host.slots - per_host.get(name, 0), f"{name} ledger out of step"
    assert sum(per_host.values()) <= sum(h.host.slots for h in s.hosts.values())
    # the book kept for speed agrees with a recount
    assert s.with_free == {n for n, h in s.hosts.items() if h.free > 0}, "with_free out of step"
    for g, gi in s.groups.items():
        assert gi.open_free == sum(h.free for h in gi.hosts if h.takes_work and h.free > 0), \
            f"{g}: open free slots out of step"
    for rid, rs in s.requests.items():
        unmarked: dict[tuple[str, str], int] = {}
        for a in rs.allocs.values():
            if a.reclaim is None:
                unmarked[(a.group, a.source)] = unmarked.get((a.group, a.source), 0) + a.slots
        assert rs.unmarked == unmarked, f"{rid}: unmarked slots out of step"
    for leaf, marked in s.reclaim_for.items():
        if leaf in s.consumers:
            assert s.incoming.get(leaf, 0) == sum(a.slots for a in marked.values()), f"{leaf}: incoming out of step"
    for (leaf, g), u in s.usage.items():
        st_ = s.consumers[leaf].groups[g]
        if st_.max is not None:
            assert s.subtree_held[g].get(leaf, 0) <= st_.max, f"{leaf} above max"
        if st_.lend_limit is not None:
            assert u.lent_total <= st_.lend_limit, f"{leaf} lent above lend_limit"
        if not st_.lend:
            assert u.lent_total == 0, f"{leaf} lent without lending on"
        if st_.borrow_limit is not None:
            assert u.borrowed_total <= st_.borrow_limit, f"{leaf} borrowed above borrow_limit"
        if not st_.borrow:
            assert u.borrowed_total == 0
        if st_.share_ratio == 0:
            # never granted pool slots; owned slots that outlived a shrunk ownership
            # are pool slots on their way out (marked for reclaim)
            marked = sum(n for src, n in u.marked.items() if src.startswith("pool:"))
            assert u.shared_total == marked, f"{leaf} has ratio 0 but holds share-pool slots"
    for p, c in s.consumers.items():
        for g, gs in c.groups.items():
            if gs.max is not None and not c.is_leaf:
                assert s.subtree_held[g].get(p, 0) <= gs.max


def check_report_is_plain_json(e: Engine) -> None:
    """Every number the report gives is a plain int (the JSON contract)."""
    for line in e.report().consumers.values():
        for gl in line.groups.values():
            for f in ("held", "owned", "borrowed", "shared", "lent", "deserved", "demand", "planned_owned"):
                assert type(getattr(gl, f)) is int, f


def check_owned_honoured(e: Engine) -> None:
    """With every deadline passed, a leaf that wants at least its (effective) owned
    slots and lends nothing holds them."""
    s = e.state
    for g, v in e._views.items():
        for leaf, owned in v.owned.items():
            if not s.consumers[leaf].is_leaf or owned == 0:
                continue
            u = s.usage.get((leaf, g))
            lent = u.lent_total if u else 0
            held = u.held if u else 0
            demand = v.demand.get(leaf, 0)
            assert held >= min(demand, owned) - lent, f"{leaf} in {g}: owns {owned}, wants {demand}, holds {held}"


@given(scenarios())
def test_invariants_hold_after_every_step(sc):
    plan, events = sc
    e, _ = play(plan, events, check_invariants)
    check_owned_honoured(e)
    check_report_is_plain_json(e)


@given(scenarios())
def test_same_input_same_decisions(sc):
    plan, events = sc
    _, d1 = play(plan, events)
    _, d2 = play(plan, events)
    assert d1 == d2


@given(scenarios(), plans())
def test_a_new_plan_under_running_work_keeps_the_invariants(sc, plan2):
    plan, events = sc
    e, _ = play(plan, events, check_invariants)
    held_before = {a.id: (a.request, a.host, a.group, a.slots) for a in e.state.allocs.values()}
    removed = e.apply_plan(plan2)
    check_invariants_after_replan(e, plan2)
    # only what the new plan cannot hold is removed, and each removal says why
    assert all(r.reason.startswith("plan change: ") for r in removed)
    kept = sum(a.slots for a in e.state.allocs.values())
    assert kept + sum(r.slots for r in removed) == sum(x[3] for x in held_before.values())
    # the new plan's consequences: decided now, given back after their grace
    last = events[-1][0] if events else 0.0
    settle(e, last)
    advance(e, 1e9)
    settle(e, 1e9)
    assert not e.state.reclaiming
    check_invariants(e)


def check_invariants_after_replan(e, plan2) -> None:
    names = {h.name for h in plan2.hosts}
    for a in e.state.allocs.values():
        assert a.host in names
        c = e.state.consumers[a.consumer]
        assert c.is_leaf and a.group in c.groups
