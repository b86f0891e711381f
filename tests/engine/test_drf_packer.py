"""Best fit and FGD in the engine keep their view of the hosts (free CPU, memory, each GPU's
free share, each host's fragmentation) from one placement to the next, reading again only the
hosts that changed: each placement must be the one engine/gpupack.py makes on a cluster built
afresh from the book's free space, as work comes and goes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.engine import Consumer, Engine, GroupSettings, Host, Plan, Request, ResourceGroup
from apportion.engine import gpupack
from apportion.engine.drf import MILLI

HOSTS = [("a", 16, 64, 2), ("b", 32, 128, 8), ("c", 8, 32, 0), ("d", 32, 256, 4), ("e", 16, 64, 8)]
SHAPES = [(1, 4, 0.0), (2, 8, 0.5), (4, 16, 1.0), (8, 32, 2.0), (1, 2, 0.25), (16, 64, 4.0), (2, 16, 0.0)]


def plan(packing: str) -> Plan:
    hosts = tuple(Host(n, c, resources=(("cores", float(c)), ("gpus", float(g)), ("memory", float(m))))
                  for n, c, m, g in HOSTS)
    return Plan(hosts=hosts, groups=(ResourceGroup("g", tuple(h.name for h in hosts), packing=packing),),
                consumers=(Consumer("/A", "/", (), 0, {"g": GroupSettings()}),))


def expected(e: Engine, packing: str, cores: int, memory: int, gpus: float) -> str | None:
    """Where gpupack puts one slot of the request on a cluster made afresh from the book."""
    book, state = e.kinds, e.state
    names = [h.name for h in plan(packing).hosts]
    free = [book.free_on(state, n) for n in names]
    rows = [book._gpu_row(state, n) for n in names]
    cluster = gpupack.Cluster([max(0, int(f.get("cores", 0.0) * 1000 + 1e-6)) for f in free],
                              [max(0, int(f.get("memory", 0.0) * 1024 + 1e-6)) for f in free],
                              [len(r) for r in rows])
    for i, r in enumerate(rows):
        cluster.gpu[i, :len(r)] = r
    k, milli = (0, 0) if not gpus else (1, round(gpus * MILLI)) if gpus < 1 else (round(gpus), MILLI)
    task = gpupack.Task(cores * 1000, memory * 1024, k, milli)
    frag = None
    if packing == "fgd":
        frag = gpupack.Fragmentation(cluster, gpupack.typical_mix(
            [gpupack.Task(int(r.need.get("cores", 0.0) * 1000), int(r.need.get("memory", 0.0) * 1024), *r.gpu)
             for r in book.requests.values()]))
    where = gpupack.choose(cluster, task, packing, frag=frag)
    return None if where is None else names[where.node]


steps = st.lists(st.tuples(st.sampled_from(["submit", "submit", "release"]),
                           st.integers(0, len(SHAPES) - 1), st.integers(0, 50)), min_size=1, max_size=40)


@pytest.mark.parametrize("packing", ["bestfit", "fgd"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps)
def test_each_placement_is_the_one_made_afresh(packing: str, steps) -> None:
    e = Engine(plan(packing))
    open_: list[str] = []
    now = 0.0
    for n, (what, shape, pick) in enumerate(steps):
        if what == "submit" or not open_:
            cores, memory, gpus = SHAPES[shape]
            rid = f"r{n}"
            # the book counts the new request among the typical tasks before it is placed
            e.submit(Request(rid, "/A", max=1, resources=(("cores", float(cores)), ("gpus", gpus),
                                                          ("memory", float(memory)))))
            want = expected(e, packing, cores, memory, gpus)
            now += 1
            d = e.cycle(now)
            assert [g.host for g in d.grants] == ([] if want is None else [want])
            if want is None:
                e.release(rid)  # not left wanting: the next cycle places only the next request
            else:
                open_.append(rid)
        else:
            e.release(open_.pop(pick % len(open_)))
