"""One DUCC scheduling cycle (DUCC's RM documentation: NodepoolScheduler), in order:

1. **nodes** (world.py): dead nodes purged, vary_off evictions, blacklisting;
2. **job caps** (caps.py): what each fair-share job can use now; what each
   non-preemptable request asks for;
3. **How Much**, per priority, best first; within a priority, nodepools bottom
   up (a subpool's classes first claim its machines, then the parent's classes
   see what is left of the whole subtree); within a nodepool, reservations, then
   fixed shares (fixed.py), then fair share (howmuch.py). How Much counts the
   space an ideal layout would have: everything but non-preemptable work, and on
   machines that take nothing new only what their fair-share processes keep;
4. **What Of** (whatof.py): last cycle's needy jobs first, then best fit;
5. **evictions**: a fair-share job holding more than its count sheds the
   difference, least investment first (evict.py);
6. **defragmentation** (defrag.py).
"""

from __future__ import annotations

from apportion.engine.ducc import evict
from apportion.engine.ducc.caps import CapRules, cap_of
from apportion.engine.ducc.config import DuccConfig
from apportion.engine.ducc.defrag import defragment
from apportion.engine.ducc.fixed import Allotments, how_much_fixed, how_much_reserve
from apportion.engine.ducc.howmuch import FairClass, HowMuch, JobAsk, Space, fair_share
from apportion.engine.ducc.types import DuccDecisions, DuccState, JobAccount, NewProcess
from apportion.engine.ducc.whatof import FreeIndex, job_order, what_of
from apportion.engine.ducc.world import FAIR, FIXED, RESERVE, J, World, ceil_div


def run_cycle(config: DuccConfig, state: DuccState, now: float) -> DuccDecisions:
    w = World(config, state, now)
    w.nodes()
    job_caps(w)
    how_much_all(w)
    index = FreeIndex(w)
    what_of(w, index, job_order(w))
    evict_over_count(w)
    defragment(w, index)
    return decisions(w)


# --- 2. job caps -----------------------------------------------------------------

def job_caps(w: World) -> None:
    rules: dict[str, CapRules] = {}
    props = w.props
    for j in w.jobs:
        if not j.schedulable:
            continue
        job, cls = j.job, j.cls
        maxp = _min_opt(job.max_processes, cls.max_processes)
        if j.policy is FAIR:
            r = rules.get(cls.name)
            if r is None:
                icap = cls.initialization_cap if cls.initialization_cap is not None else props.initialization_cap
                r = rules[cls.name] = CapRules(
                    initialization_cap=icap or None,
                    expand_by_doubling=props.expand_by_doubling if cls.expand_by_doubling is None
                    else cls.expand_by_doubling,
                    use_prediction=props.prediction if cls.use_prediction is None else cls.use_prediction,
                    prediction_fudge_s=(props.prediction_fudge if cls.prediction_fudge is None
                                        else cls.prediction_fudge) / 1000.0)
            j.cap = cap_of(job.remaining_items, max(1, job.threads), maxp, j.active, j.initialized,
                           job.init_seconds, job.seconds_per_item, r)
        elif j.policy is FIXED:
            if job.kind == "job":
                want = ceil_div(job.remaining_items, max(1, job.threads))
                j.want = want if maxp is None else min(want, maxp)
            else:
                j.want = 1
            j.cap = max(j.want, j.active)
        else:  # RESERVE: one whole machine
            j.want = 1
            j.cap = 1


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


# --- 3. How Much -------------------------------------------------------------------

def ideal_spaces(w: World) -> dict[str, Space]:
    """The space How Much divides, per nodepool (its own machines only)."""
    spaces = {name: Space(max(1, info.max_order)) for name, info in w.pools.items()}
    for m in w.machines:
        if m.pool is None or m.status == "dead":
            continue
        sp = spaces[m.pool.name]
        if m.accepting:
            fixed = 0
            for p in m.procs:
                if p.present and (p.j is None or p.j.policy is not FAIR):
                    fixed += p.order
            if m.order - fixed > 0:
                sp.add(m.order, m.order - fixed)
        else:
            for p in m.procs:
                if p.active and p.j is not None and p.j.policy is FAIR:
                    sp.add_part(p.order)
    return spaces


def how_much_all(w: World) -> None:
    spaces = ideal_spaces(w)
    allot = Allotments(w)
    orders: dict[str, set[int]] = {}
    for m in w.machines:
        if m.pool is not None and m.status != "dead":
            orders.setdefault(m.pool.name, set()).add(m.order)
    groups: dict[tuple[int, int], list[J]] = {}
    for j in w.jobs:
        if j.schedulable:
            groups.setdefault((j.priority, j.pool.rank), []).append(j)
    fair_classes = {name: FairClass(name, c.weight or 1, c.priority)
                    for name, c in w.config.classes.items() if c.policy is FAIR}
    hm = HowMuch()
    for key in sorted(groups):
        jobs = groups[key]
        pool = jobs[0].pool
        for j in jobs:
            if j.policy is RESERVE:
                how_much_reserve(w, j, spaces[pool.name], allot, orders)
        for j in jobs:
            if j.policy is FIXED:
                how_much_fixed(w, j, spaces[pool.name], allot)
        fair = [j for j in jobs if j.policy is FAIR]
        if not fair:
            continue
        view = [spaces[name] for name in pool.search]
        largest = max(w.pools[name].max_order for name in pool.search)
        asks = []
        for j in fair:
            if j.order > largest:
                if j.active == 0:
                    j.deferred = (f"a process of {j.order} quanta ({j.order * pool.quantum} GB) is larger than "
                                  f"any machine in nodepool {pool.name}" + (" and its subpools" if len(pool.search) > 1
                                                                            else ""))
                continue
            hm.counts[j.id] = 0
            hm.pure_fair_share[j.id] = 0
            if j.cap > 0:
                asks.append(JobAsk(j.id, j.user, j.cls.name, j.order, j.cap, j.job.submitted_at))
        fair_share(asks, fair_classes, view, hm)
        for j in fair:
            if j.id in hm.counts:
                j.counted = hm.counts[j.id]
                j.pure = hm.pure_fair_share[j.id]


# --- 5. evictions ------------------------------------------------------------------

def evict_over_count(w: World) -> None:
    for j in w.jobs:
        if j.policy is not FAIR or j.active <= j.counted:
            continue
        excess = j.active - j.counted
        cands = [evict.Process(p.share_id, p.initialized, w.investment_age(p) if not p.initialized else 0.0,
                               p.investment, p.m.depth, p.started)
                 for p in j.procs if p.active and not p.new]
        by_id = {p.share_id: p for p in j.procs}
        for victim in evict.shed(cands, excess):
            w.evict(by_id[victim.id], "over-count")


# --- the result --------------------------------------------------------------------

def decisions(w: World) -> DuccDecisions:
    new = tuple(NewProcess(p.share_id, p.j.id, p.m.name, p.order, p.order * p.m.pool.quantum)
                for p in w.new if not p.cancelled)
    jobs = {j.id: account(w, j) for j in sorted(w.jobs, key=lambda j: j.id)}
    machines = {}
    for m in w.machines:
        blacklisted = m.status == "no-nodepool" or (m.blacklisted and m.status != "dead")
        machines[m.name] = "blacklisted" if blacklisted else m.status
    blacklisted = tuple(sorted(p.share_id for p in w.procs if p.blacklisted and not p.gone))
    return DuccDecisions(now=w.now, new=new, evictions=tuple(w.evictions), lost=tuple(w.lost), jobs=jobs,
                         needy=tuple(w.needy_next), blacklisted=blacklisted, machines=machines,
                         next_share_id=w.next_id)


def account(w: World, j: J) -> JobAccount:
    held = j.active + j.leaving  # every process present, new ones included
    leaving = j.leaving
    keeps = j.active
    if j.deferred is not None and keeps == 0:
        return JobAccount(0, held, leaving, "deferred", j.deferred, 0, 0)
    if j.lost:
        reason = f"lost {j.lost} process{'es' if j.lost > 1 else ''} on a dead node; not rescheduled this cycle"
        return JobAccount(j.counted, held, leaving, "running" if keeps else "waiting", reason, j.pure, j.cap)
    if j.deferred is not None:
        reason = j.deferred
    elif j.counted == 0:
        if j.cap == 0 and j.policy is FAIR:
            reason = "no work left to run" if j.job.remaining_items == 0 else "nothing it can use now"
        elif j.note:
            reason = j.note
        else:
            reason = f"nodepool {j.pool.name} has no space for it at its priority now"
    elif keeps >= j.counted:
        reason = f"holds {keeps} of {j.counted} counted"
    else:
        short = j.counted - keeps
        reason = (f"holds {keeps} of {j.counted} counted; {short} wait"
                  f"{'s' if short == 1 else ''} for space")
        if j.id in w.needy_next:
            reason += " (needy: placed first next cycle)"
    if leaving:
        reason += f"; {leaving} being removed"
    if j.note and j.counted and j.note not in reason:
        reason += f"; {j.note}"
    state = "running" if keeps > 0 else "waiting"
    return JobAccount(j.counted, held, leaving, state, reason, j.pure if j.policy is FAIR else j.counted, j.cap)
