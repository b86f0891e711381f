"""The real DUCC files in ../shared/traces/ducc: the shipped class configuration and the 52-node simulator."""

from __future__ import annotations

from collections import Counter

from apportion.importers.ducc import Policy, load_ducc
from tests.importers.shared import TRACES, needs_traces

pytestmark = needs_traces


def test_shipped_class_configuration():
    cfg = load_ducc(TRACES)
    assert list(cfg.nodepools) == ["--default--"]
    pool = cfg.nodepools["--default--"]
    assert (pool.parent, pool.nodefile, pool.share_quantum, pool.search_order) == (None, None, 1, 100)
    expected = {
        # name: (policy, priority, weight, parent, default)
        "background": (Policy.FAIR_SHARE, 10, 1, "fair-base", False),
        "low": (Policy.FAIR_SHARE, 10, 50, "fair-base", False),
        "normal": (Policy.FAIR_SHARE, 10, 100, "fair-base", True),
        "high": (Policy.FAIR_SHARE, 10, 200, "fair-base", False),
        "weekly": (Policy.FAIR_SHARE, 10, 100, "fair-base", False),
        "urgent": (Policy.FAIR_SHARE, 10, 400, "fair-base", False),
        "standalone": (Policy.FAIR_SHARE, 10, 150, None, False),
        "fixed": (Policy.FIXED_SHARE, 5, None, "fixed-base", True),
        "debug": (Policy.FIXED_SHARE, 7, None, "fixed-base", False),
        "JobDriver": (Policy.FIXED_SHARE, 9, None, "fixed-base", False),
        "reserve": (Policy.RESERVE, 1, None, "reserve-base", True),
    }
    got = {c.name: (c.policy, c.priority, c.weight, c.parent, c.default) for c in cfg.schedulable_classes()}
    assert got == expected
    assert [n for n, c in cfg.classes.items() if c.abstract] == ["fair-base", "fixed-base", "reserve-base"]
    assert all(c.nodepool == "--default--" for c in cfg.classes.values())
    # fair-base's `debug = debug` is inherited by every class derived from it, not by standalone
    assert {c.name for c in cfg.classes.values() if c.debug == "debug"} == {
        "fair-base", "background", "low", "normal", "high", "weekly", "urgent"}
    assert cfg.users == {}


def test_the_shipped_configuration_means_what_apportions_own_default_means():
    assert load_ducc(TRACES).classes == load_ducc().classes
    assert load_ducc(TRACES).nodepools["--default--"].nodefile == load_ducc().nodepools["--default--"].nodefile


def test_the_simulated_cluster():
    cfg = load_ducc(TRACES, properties={"ducc.rm.share.quantum": 15})
    # 52.simulated.nodes describes 53 nodes: 52 on sys290-293 and one more on sys534
    assert len(cfg.hosts) == 53
    assert Counter(cfg.hosts.values()) == {31: 29, 47: 20, 79: 4}
    assert list(cfg.hosts)[:2] == ["sys534-1", "sys290-2"] and list(cfg.hosts)[-1] == "sys293-53"
    assert cfg.nodepools["--default--"].nodes == tuple(cfg.hosts)
    quantum = cfg.quantum("--default--")
    orders = Counter(int(mem // quantum) for mem in cfg.hosts.values())
    assert orders == {2: 29, 3: 20, 5: 4}
    assert sum(o * n for o, n in orders.items()) == 138  # 136 without sys534's one 31 GB node
