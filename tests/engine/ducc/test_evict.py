"""Least investment first, criterion by criterion; needy jobs."""

from __future__ import annotations

from apportion.engine.ducc.evict import Process, needy, shed


def ids(ps):
    return [p.id for p in ps]


def test_initialising_processes_go_before_initialised_ones():
    ps = [Process("done", True, init_seconds=5, investment=0), Process("starting", False, init_seconds=500)]
    assert ids(shed(ps, 1)) == ["starting"]


def test_among_initialising_the_shortest_initialisation_first():
    ps = [Process("long", False, init_seconds=90), Process("short", False, init_seconds=10)]
    assert ids(shed(ps, 2)) == ["short", "long"]


def test_among_initialised_the_lowest_investment_first():
    ps = [Process("rich", True, investment=900), Process("poor", True, investment=30),
          Process("mid", True, investment=300)]
    assert ids(shed(ps, 2)) == ["poor", "mid"]


def test_then_the_deepest_nodepool_then_the_youngest():
    ps = [Process("top", True, investment=10, nodepool_depth=0, started=5),
          Process("nested", True, investment=10, nodepool_depth=2, started=1),
          Process("old", True, investment=10, nodepool_depth=0, started=1)]
    assert ids(shed(ps, 3)) == ["nested", "top", "old"]


def test_shed_nothing_or_everything():
    ps = [Process("a", True), Process("b", False)]
    assert shed(ps, 0) == [] and ids(shed(ps, 5)) == ["b", "a"]


def test_needy_below_both_the_pure_share_and_the_threshold():
    assert needy(allocated=2, pure_fair_share=8, fragmentation_threshold=4)
    assert not needy(allocated=5, pure_fair_share=8, fragmentation_threshold=4)  # above the threshold
    # a job that can run 3 processes is never needy for an 8-process fair share
    assert not needy(allocated=3, pure_fair_share=3, fragmentation_threshold=8)
