"""Dominant Resource Fairness's guarantees (Ghodsi et al., NSDI 2011), checked on many
generated cases: one host of divisible resources (every task is small beside it), leaves
that all want more than there is. Tasks are whole, so each guarantee holds up to the
granularity of a task: ``tol`` is the largest dominant share of one task of any leaf, and
envy and gains from lying are measured in dominant share, at most ``2 * tol`` (for a lie,
plus what one task of another leaf holds of a resource that runs out, counted in the
liar's own tasks: which leaf's last task fits there moves by a whole task)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import Consumer, Engine, GroupSettings, Host, Plan, Request, ResourceGroup

KINDS = ("cores", "memory", "gpus")
EPS = 1e-9

task = st.tuples(*(st.integers(0, 6) for _ in KINDS)).filter(any)
case = st.tuples(
    st.tuples(*(st.integers(120, 600) for _ in KINDS)),  # the host
    st.lists(task, min_size=2, max_size=4),              # one task shape per leaf
)


def run(totals, tasks) -> list[int]:
    """Tasks each leaf gets with unbounded demand."""
    host = Host("m", 10**6, resources=tuple(zip(KINDS, map(float, totals))))
    consumers = tuple(Consumer(f"/u{i}", "/", (), i, {"g": GroupSettings()}) for i in range(len(tasks)))
    e = Engine(Plan(hosts=(host,), groups=(ResourceGroup("g", ("m",)),), consumers=consumers))
    for i, t in enumerate(tasks):
        e.submit(Request(f"r{i}", f"/u{i}", max=10**5, resources=tuple((k, float(a)) for k, a in zip(KINDS, t) if a)))
    e.cycle(0)
    return [e.kinds.requests[f"r{i}"].held for i in range(len(tasks))]


def sigma(t, totals) -> float:
    """One task's dominant share."""
    return max(a / c for a, c in zip(t, totals))


def runs_on(alloc, t) -> int:
    """Tasks of shape ``t`` that the resources ``alloc`` can run."""
    return min(math.floor(a / d + EPS) for a, d in zip(alloc, t) if d)


def used(n, t):
    return [n * a for a in t]


@settings(max_examples=150, deadline=None)
@given(case)
def test_pareto_efficient_no_leaf_can_get_one_more_task(c) -> None:
    totals, tasks = c
    got = run(totals, tasks)
    free = [T - sum(n * t[k] for n, t in zip(got, tasks)) for k, T in enumerate(totals)]
    assert all(x >= 0 for x in free)
    for t in tasks:
        assert any(t[k] > free[k] for k in range(len(KINDS))), "a task still fits: not Pareto efficient"


@settings(max_examples=150, deadline=None)
@given(case)
def test_sharing_incentive_each_leaf_gets_at_least_a_1_over_n_share(c) -> None:
    totals, tasks = c
    got = run(totals, tasks)
    n = len(tasks)
    tol = max(sigma(t, totals) for t in tasks)
    for k, t in zip(got, tasks):
        # a dominant share at least 1/n (what a static 1/n partition would give), up to one task
        assert k * sigma(t, totals) >= (1 - tol) / n - tol - EPS


@settings(max_examples=150, deadline=None)
@given(case)
def test_envy_free_no_leaf_prefers_anothers_allocation(c) -> None:
    totals, tasks = c
    got = run(totals, tasks)
    tol = max(sigma(t, totals) for t in tasks)
    for i, ti in enumerate(tasks):
        mine = got[i] * sigma(ti, totals)
        for j, tj in enumerate(tasks):
            if i != j:
                # i's dominant share with j's resources is not above its own, up to task granularity
                assert runs_on(used(got[j], tj), ti) * sigma(ti, totals) <= mine + 2 * tol + EPS


@settings(max_examples=150, deadline=None)
@given(case, st.data())
def test_strategy_proof_asking_for_more_never_gains(c, data) -> None:
    totals, tasks = c
    honest = run(totals, tasks)
    i = data.draw(st.integers(0, len(tasks) - 1))
    extra = data.draw(st.tuples(*(st.integers(0, 4) for _ in KINDS)).filter(any))
    lie = tuple(a + b for a, b in zip(tasks[i], extra))
    lied = run(totals, [lie if k == i else t for k, t in enumerate(tasks)])
    # what i's true tasks can run in what it got by lying: never more than telling the truth,
    # up to whole tasks: one task of the liar's or another's (``tol``), and what one task of
    # another leaf holds of a resource i's tasks need, counted in i's tasks (``grain``): where
    # that resource runs out, which leaf's last task still fits moves by one whole task, and
    # one such task can hold several of i's (5 GB of memory is 5 tasks of 1 GB)
    tol = max(sigma(t, totals) for t in (*tasks, lie))
    s = sigma(tasks[i], totals)
    grain = max(math.ceil(t[k] / tasks[i][k]) for t in tasks for k in range(len(KINDS)) if tasks[i][k]) * s
    assert runs_on(used(lied[i], lie), tasks[i]) * s <= honest[i] * s + 2 * tol + grain + EPS


def test_a_lie_gains_no_more_than_one_task_of_anothers_in_the_resource_that_runs_out() -> None:
    """A case the property found: A's true task is <0, 1 GB, 4 GPUs>, B's <1 CPU, 5 GB, 0>.
    Claiming <0, 2, 8>, A's tasks run 36 on what it gets against 31 honest: B's last task
    no longer fits in the memory left (5 GB), and A's fit there. The gain is one of B's
    tasks in memory, 5 of A's, and no more."""
    totals, tasks, lie = (469, 176, 155), [(0, 1, 4), (1, 5, 0)], (0, 2, 8)
    honest, lied = run(totals, tasks), run(totals, [lie, tasks[1]])
    assert honest == [31, 29] and lied == [18, 28]
    assert runs_on(used(lied[0], lie), tasks[0]) - honest[0] == 5 == math.ceil(tasks[1][1] / tasks[0][1])


def test_the_papers_example_in_these_terms() -> None:
    assert run((9, 18, 0), [(1, 4, 0), (3, 1, 0)]) == [3, 2]
