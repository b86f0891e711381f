"""GPU packing: placements stay within every host's CPU, memory and GPUs; fractions share one
GPU; FGD's measure by hand; FGD keeps a whole GPU free where best-fit breaks it."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine.gpupack import (
    MILLI, Cluster, Fragmentation, Placement, Task, choose, default_gpus, typical_mix,
)

MODELS = (0, 1)


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 6))
    cpu = [draw(st.sampled_from([4000, 8000, 16000, 32000])) for _ in range(n)]
    mem = [draw(st.sampled_from([8192, 32768, 65536])) for _ in range(n)]
    gpus = [draw(st.sampled_from([0, 1, 2, 4, 8])) for _ in range(n)]
    models = [draw(st.sampled_from(MODELS)) if g else -1 for g in gpus]
    return Cluster(cpu, mem, gpus, models)


@st.composite
def tasks(draw):
    kind = draw(st.sampled_from(["cpu", "fraction", "whole", "fractions"]))
    cpu = draw(st.sampled_from([500, 1000, 2000, 4000, 12000]))
    mem = draw(st.sampled_from([0, 1024, 4096, 16384]))
    models = draw(st.one_of(st.none(), st.sampled_from([frozenset({0}), frozenset({1}), frozenset(MODELS)])))
    if kind == "cpu":
        return Task(cpu, mem)
    if kind == "fraction":
        return Task(cpu, mem, 1, draw(st.integers(50, 999)), models)
    if kind == "fractions":
        return Task(cpu, mem, 2, draw(st.integers(50, 999)), models)
    return Task(cpu, mem, draw(st.sampled_from([1, 2, 4, 8])), MILLI, models)


def _check_within(c: Cluster) -> None:
    assert (c.cpu >= 0).all() and (c.cpu <= c.cpu_cap).all()
    assert (c.mem >= 0).all() and (c.mem <= c.mem_cap).all()
    assert (c.gpu >= 0).all() and (c.gpu <= c.gpu_cap).all()


@settings(max_examples=60, deadline=None)
@given(c=clusters(), ts=st.lists(tasks(), min_size=1, max_size=25),
       policy=st.sampled_from(["random", "bestfit", "fgd"]), seed=st.integers(0, 2**16))
def test_placements_never_exceed_a_host_and_fractions_share_one_gpu(c, ts, policy, seed):
    rng = np.random.default_rng(seed)
    frag = Fragmentation(c, typical_mix(ts))
    for t in ts:
        could = c.feasible(t).any()
        gpu_before = c.gpu.copy()
        where = choose(c, t, policy, frag=frag, rng=rng)
        assert (where is None) == (not could)
        if where is None:
            continue
        assert len(where.gpus) == t.num_gpu
        if t.num_gpu == 1 and t.gpu_milli < MILLI:
            assert len(where.gpus) == 1                                   # a fraction lands on one GPU
            assert gpu_before[where.node, where.gpus[0]] >= t.gpu_milli
        if t.gpu_milli == MILLI:
            assert all(gpu_before[where.node, g] == MILLI for g in where.gpus)   # whole GPUs are wholly free
        if t.num_gpu and t.models is not None:
            assert int(c.model[where.node]) in t.models
        c.place(t, where)
        frag.refresh(where.node)
        _check_within(c)
        changed = np.flatnonzero((c.gpu != gpu_before).any(axis=1))
        assert set(changed.tolist()) <= {where.node}


@settings(max_examples=60, deadline=None)
@given(c=clusters(), pre=st.lists(tasks(), max_size=12), t=tasks(), mix=st.lists(tasks(), min_size=1, max_size=8))
def test_scored_growth_matches_the_measure_rebuilt_after_placing(c, pre, t, mix):
    """FGD scores a placement from per-class counts; it must equal the measure of the host
    rebuilt from scratch once the task is there."""
    m = typical_mix(mix)
    frag = Fragmentation(c, m)
    for p in pre:
        w = choose(c, p, "bestfit")
        if w is not None:
            c.place(p, w)
            frag.refresh(w.node)
    assert np.allclose(frag.frag, Fragmentation(c, m).frag)
    nodes = np.flatnonzero(c.feasible(t))
    if not len(nodes):
        return
    after, cands = frag.after(t, nodes)
    if cands is None:
        options = [(i, default_gpus(c, t, int(n)), after[i]) for i, n in enumerate(nodes)]
    else:
        at, gpu, free = cands
        assert set(zip(at.tolist(), free.tolist())) == {                  # every distinct fitting GPU
            (i, int(c.gpu[n, g])) for i, n in enumerate(nodes) for g in range(c.gpu.shape[1])
            if c.gpu[n, g] >= t.gpu_milli}
        options = [(int(i), (int(g),), v) for i, g, v in zip(at, gpu, after)]
    for i, gs, got in options:
        n = int(nodes[i])
        c2 = copy.deepcopy(c)
        c2.place(t, Placement(n, gs))
        assert got == pytest.approx(Fragmentation(c2, m).frag[n], abs=1e-6)


def test_the_measure_by_hand():
    """A host with two GPUs of 600 free; half the tasks want a whole GPU, half want 500: the
    whole-GPU half can use none of the 1200 (600 fragmented in expectation), the 500 half can
    use both. After a 500 on one GPU, [100, 600]: 0.5 x 700 + 0.5 x 100 = 400."""
    c = Cluster([8000], [0], [2])
    c.place(Task(0, 0, 1, 400), Placement(0, (0,)))
    c.place(Task(0, 0, 1, 400), Placement(0, (1,)))
    m = typical_mix([Task(1000, 0, 1, MILLI), Task(1000, 0, 1, 500)])
    f = Fragmentation(c, m)
    assert f.frag[0] == pytest.approx(600)
    after, (at, gpu, free) = f.after(Task(1000, 0, 1, 500), np.array([0]))
    assert after.tolist() == pytest.approx([400]) and gpu.tolist() == [0] and free.tolist() == [600]
    # a task that asks for no GPU: all free GPU capacity counts as fragmented for it
    only_cpu = Fragmentation(c, typical_mix([Task(1000)]))
    assert only_cpu.frag[0] == pytest.approx(1200)


def test_fgd_keeps_a_whole_gpu_free_where_bestfit_breaks_it():
    """Host 0 has two GPUs with 600 free each, host 1 one whole GPU. A half-GPU task, then a
    whole-GPU task. Best-fit looks at the host's total (1000 left on host 1 is tighter than
    1200) and splits the only whole GPU, so the whole-GPU task finds none; FGD puts the half on
    host 0, where it grows fragmentation least, and both tasks run."""
    half, whole = Task(1000, 0, 1, 500), Task(1000, 0, 1, MILLI)
    mix = typical_mix([half, whole])
    placed = {}
    for policy in ("bestfit", "fgd"):
        c = Cluster([8000, 8000], [0, 0], [2, 1])
        c.place(Task(0, 0, 1, 400), Placement(0, (0,)))
        c.place(Task(0, 0, 1, 400), Placement(0, (1,)))
        frag = Fragmentation(c, mix)
        got = 0
        for t in (half, whole):
            w = choose(c, t, policy, frag=frag)
            if w is not None:
                c.place(t, w)
                frag.refresh(w.node)
                got += t.gpu_total
        placed[policy] = got
    assert placed == {"bestfit": 500, "fgd": 1500}


def test_bad_input_is_refused_and_changes_nothing():
    c = Cluster([4000], [1024], [1])
    with pytest.raises(ValueError, match="gpu_milli"):
        Task(1000, 0, 1, 0)
    with pytest.raises(ValueError, match="policy"):
        choose(c, Task(1000), "worst")
    with pytest.raises(ValueError, match="GPU 0"):
        c.place(Task(1000, 0, 1, 600), Placement(0, (0,)))
        c.place(Task(1000, 0, 1, 600), Placement(0, (0,)))
    assert c.cpu[0] == 3000 and c.gpu[0, 0] == 400
    with pytest.raises(ValueError, match="CPU or memory"):
        c.place(Task(8000), Placement(0, ()))
    assert c.cpu[0] == 3000 and c.mem[0] == 1024
