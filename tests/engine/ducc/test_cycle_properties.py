"""Properties of the DUCC cycle over random small clusters, several cycles each.

After every cycle: no machine holds more quanta than its order; every process is on
a machine of its class's nodepool (or, fair share only, a subpool of it); nothing new
lands on a machine closed to new work; fair-share counts stay within the job caps and
what a job keeps stays within its count; and the same input gives the same output."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from apportion.engine.ducc.api import DuccState, Job, Machine, advance, confirm_gone, machine_order, schedule

from tests.engine.ducc.sim import config, fair, fixed, pool, reserve


@st.composite
def clusters(draw):
    quantum = draw(st.sampled_from([1, 2]))
    n_top = draw(st.integers(1, 4))
    n_sub = draw(st.integers(0, 3))
    top = [f"t{i}" for i in range(n_top)]
    sub = [f"s{i}" for i in range(n_sub)]
    pools = [pool("p", top, quantum=quantum)]
    if sub:
        pools.append(pool("s", sub, parent="p"))
    prio = st.sampled_from([1, 5, 10])
    classes = [fair("f1", "p", priority=draw(prio), weight=draw(st.integers(1, 3)),
                    init_cap=draw(st.sampled_from([1, 2, 100])), doubling=draw(st.booleans())),
               fair("f2", "s" if sub else "p", priority=draw(prio), weight=draw(st.integers(1, 3))),
               fixed("x", "p", priority=draw(prio), max_allotment=draw(st.sampled_from([None, 4, 8]))),
               reserve("r", "p", priority=draw(prio), enforce=draw(st.booleans()))]
    cfg = config(pools, classes, fragmentation_threshold=draw(st.sampled_from([1, 2, 8])), node_stability=2)
    sizes = st.integers(1, 8).map(lambda o: o * quantum)
    machines = tuple(Machine(n, draw(sizes)) for n in top + sub)
    jobs = []
    for k in range(draw(st.integers(1, 8))):
        cls = draw(st.sampled_from(["f1", "f2", "x", "r"]))
        kind = {"f1": "job", "f2": "job", "x": draw(st.sampled_from(["job", "service", "reservation"])),
                "r": "reservation"}[cls]
        jobs.append(Job(f"j{k}", f"u{draw(st.integers(0, 2))}", cls, draw(st.integers(1, 6)) * quantum / 2,
                        max_processes=draw(st.sampled_from([None, 2, 5])), threads=draw(st.integers(1, 2)),
                        work_items=draw(st.integers(0, 20)), submitted_at=float(k % 3), kind=kind))
    events = draw(st.lists(st.tuples(st.sampled_from(machines).map(lambda m: m.name),
                                     st.sampled_from(["ok", "unavailable", "varied_off", "dead", "beat"])),
                           max_size=3))
    return cfg, DuccState(machines, tuple(jobs)), events


def check(cfg, before: DuccState, d, after: DuccState) -> None:
    quantum = cfg.quantum("p")
    machines = {m.name: m for m in after.machines}
    pool_of = {h: np.name for np in cfg.nodepools.values() for h in np.nodes}
    jobs = {j.id: j for j in after.jobs}
    used: dict[str, int] = {}
    for p in after.processes:
        used[p.machine] = used.get(p.machine, 0) + p.order
        cls = cfg.classes[jobs[p.job].cls]
        where = pool_of[p.machine]
        if cls.policy.value == "FAIR_SHARE":
            assert where == cls.nodepool or cfg.nodepools[where].parent == cls.nodepool
        else:
            assert where == cls.nodepool
    for name, q in used.items():
        m = machines[name]
        assert q <= machine_order(m.memory_gb, quantum), f"{name} holds {q} quanta"
    for n in d.new:
        m = machines[n.machine]
        assert m.state == "ok" and m.missed_heartbeats < cfg.properties.node_stability
        assert d.machines[n.machine] == "ok"
    for jid, acc in d.jobs.items():
        cls = cfg.classes[jobs[jid].cls]
        keeps = acc.held - acc.pending_removal
        if cls.policy.value == "FAIR_SHARE":
            assert acc.counted <= acc.cap
            assert keeps <= acc.counted
            assert acc.deserved <= acc.counted
        elif cls.policy.value == "RESERVE":
            assert keeps <= 1
    # a job sheds processes for its count only when it held more than its count: after
    # the shedding it keeps exactly its count, less what defragmentation then took (a
    # moved process is an eviction and a new process)
    for jid in {e.job for e in d.evictions if e.reason == "over-count"}:
        acc = d.jobs[jid]
        taken = sum(1 for e in d.evictions if e.job == jid and e.reason == "defrag")
        moved_in = sum(1 for n in d.new if n.job == jid)
        assert acc.held - acc.pending_removal + taken - moved_in == acc.counted
    assert schedule(cfg, before, d.now) == d  # same input, same output


@given(clusters())
def test_cycles_keep_machines_within_their_order_and_work_in_its_nodepools(case):
    cfg, state, events = case
    now = 0.0
    for k in range(4):
        state = confirm_gone(state)
        d = schedule(cfg, state, now)
        after = advance(state, d)
        check(cfg, state, d, after)
        state = replace(after, processes=tuple(replace(p, initialized=True, investment=p.investment + 1)
                                               for p in after.processes))
        if k < len(events):
            name, what = events[k]
            ms = []
            for m in state.machines:
                if m.name == name:
                    m = replace(m, missed_heartbeats=m.missed_heartbeats + 1) if what == "beat" else \
                        replace(m, state=what)
                ms.append(m)
            state = replace(state, machines=tuple(ms))
        now += 10.0


@given(clusters(), st.data())
def test_after_a_config_change_misplaced_work_is_blacklisted_and_its_machines_take_nothing(case, data):
    cfg, state, _ = case
    for _ in range(2):
        state = advance(confirm_gone(state), schedule(cfg, confirm_gone(state), 0.0))
    # the new configuration: classes change nodepools, and maybe a host changes pool
    pools = dict(cfg.nodepools)
    classes = dict(cfg.classes)
    if "s" in pools:
        target = data.draw(st.sampled_from(["p", "s"]))
        for name in data.draw(st.lists(st.sampled_from(sorted(classes)), max_size=4, unique=True)):
            classes[name] = replace(classes[name], nodepool=target)
        if pools["p"].nodes and data.draw(st.booleans()):
            moved = pools["p"].nodes[0]
            pools["p"] = replace(pools["p"], nodes=pools["p"].nodes[1:])
            pools["s"] = replace(pools["s"], nodes=pools["s"].nodes + (moved,))
    new_cfg = type(cfg)(pools, classes, cfg.users, cfg.properties)
    pool_of = {h: np.name for np in new_cfg.nodepools.values() for h in np.nodes}
    for k in range(3):
        state = confirm_gone(state)
        d = schedule(new_cfg, state, 10.0 * (k + 1))
        after = advance(state, d)
        jobs = {j.id: j for j in after.jobs}
        bad = set()
        for p in after.processes:
            cls = new_cfg.classes[jobs[p.job].cls]
            where = pool_of[p.machine]
            ok = where == cls.nodepool or (cls.policy.value == "FAIR_SHARE"
                                          and new_cfg.nodepools[where].parent == cls.nodepool)
            if not ok:
                bad.add(p.share_id)
                assert p.share_id in d.blacklisted
                # evictable work is on its way out; reservations stay
                assert p.share_id in after.pending_removal or jobs[p.job].kind == "reservation"
        blacklisted_machines = {p.machine for p in after.processes if p.share_id in bad}
        assert all(d.machines[m] == "blacklisted" for m in blacklisted_machines)
        assert not {n.machine for n in d.new} & blacklisted_machines
        state = after
