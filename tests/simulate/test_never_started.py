"""Rigid jobs never strand: every job that fits what its consumer may ever use starts
before the replay ends (``never_started`` 0), on random small traces and on a slice of
CEA Curie beside the EASY baseline."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.simulate.replay import Replay
from apportion.traces.record import TraceJob
from tests.simulate.helpers import by_user, plan, shared_traces

REPO = Path(__file__).resolve().parents[2]
CURIE = shared_traces() / "CEA-Curie-2011-2.1-cln.swf.gz"


@st.composite
def _cases(draw):
    n_consumers = draw(st.integers(1, 4))
    hosts = draw(st.integers(1, 3))
    per_host = draw(st.integers(2, 8))
    capacity = hosts * per_host
    consumers = [{"path": f"/c{i}", "share_ratio": draw(st.integers(1, 3)), "grace": draw(st.sampled_from([0, 5]))}
                 for i in range(n_consumers)]
    left = capacity
    for c in consumers:  # owners that lend or not, beside consumers that own nothing (EGO's ownership)
        owned = draw(st.integers(0, left))
        if owned:
            c.update(owned=owned, lend=draw(st.booleans()))
            left -= owned
    jobs = []
    t = 0.0
    for i in range(draw(st.integers(1, 25))):
        t += draw(st.sampled_from([0.0, 0.0, 1.0, 7.0, 40.0]))
        run = float(draw(st.integers(1, 100)))
        walltime = draw(st.one_of(st.none(), st.floats(1.0, 200.0)))  # an estimate, right or wrong
        jobs.append(TraceJob(id=str(i), submit=t, run=run, slots=draw(st.integers(1, capacity)),
                             user=f"u{draw(st.integers(0, n_consumers - 1))}", walltime=walltime))
    return consumers, hosts, capacity, jobs


class _Endless(AssertionError):
    pass


def _bounded(p) -> None:
    """A replay of 25 jobs that runs 5,000 cycles is going round in circles (work started
    and reclaimed over and over): a livelock, failed here rather than hung."""
    if p.cycles >= 5_000:
        raise _Endless(f"{p.cycles} cycles at t={p.now}: {p.finished} of {p.arrived} jobs finished")


@settings(max_examples=120, deadline=None)
@given(_cases())
def test_every_rigid_job_that_fits_starts(case):
    consumers, hosts, capacity, jobs = case
    p = plan(consumers, capacity, hosts=hosts)
    r = Replay(p, jobs, by_user({f"u{i}": f"/c{i}" for i in range(len(consumers))}),
               on_progress=_bounded, progress_every=500)
    r.run()
    res = r.result()
    # a job of a few slots spans hosts as a rigid request may: only one wider than what its consumer
    # may ever use is unrunnable: the slots less what the others own and do not lend it (a borrower
    # whose grace is longer than the lender's may not borrow from it)
    def lends_to(o, c):
        return o.get("lend") and c["grace"] <= o["grace"]

    room = {f"u{i}": capacity - sum(o.get("owned", 0) for o in consumers if o is not c and not lends_to(o, c))
            for i, c in enumerate(consumers)}
    assert res["unrunnable"] == sum(1 for j in jobs if j.slots > room[j.user])
    assert res["never_started"] == 0, res["consumers"]
    assert sum(c["jobs"] for c in res["consumers"].values()) + res["unrunnable"] == len(jobs)


def test_two_owners_lending_to_each_other_take_turns_without_circling():
    """/c2 and /c3 own 7 and 6 and lend; each has a rigid job that needs one slot of the
    other's. /c1's 7 idle slots are not lent. An owner takes its lent slot back only when
    its job can then start on what it may use, not on idle slots of /c1's: before, each took
    its slot back from the other's running job in turn, for ever (hypothesis found it)."""
    consumers = [{"path": "/c0", "share_ratio": 1, "grace": 0, "owned": 1, "lend": False},
                 {"path": "/c1", "share_ratio": 1, "grace": 0, "owned": 7, "lend": False},
                 {"path": "/c2", "share_ratio": 1, "grace": 0, "owned": 7, "lend": True},
                 {"path": "/c3", "share_ratio": 1, "grace": 0, "owned": 6, "lend": True}]
    jobs = [TraceJob(id="0", submit=0.0, run=2.0, slots=8, user="u2"),
            *(TraceJob(id=str(i), submit=0.0, run=1.0, slots=1, user="u0") for i in range(1, 6)),
            TraceJob(id="6", submit=0.0, run=2.0, slots=7, user="u3")]
    r = Replay(plan(consumers, 21, hosts=3), jobs, by_user({f"u{i}": f"/c{i}" for i in range(4)}),
               on_progress=_bounded, progress_every=500)
    r.run()
    res = r.result()
    assert (res["never_started"], res["unrunnable"], res["evictions"]) == (0, 0, 0), res
    assert sum(c["jobs"] for c in res["consumers"].values()) == 7


NASA = shared_traces() / "NASA-iPSC-1993-3.1-cln.swf.gz"


@pytest.mark.skipif(not NASA.exists(), reason=f"needs {NASA} (the shared traces beside the repository)")
def test_nasa_three_tenants_arriving_faster_ends_with_every_job_run():
    """NASA iPSC's first 400 jobs under the three tenants' plan, arriving 1.5 times as fast:
    /Aero's 128-slot job starts through its reservation and is not then reclaimed for a
    narrower job of /Others, nor do the two split the idle slots so that neither can start;
    the replay ends, with every job run (it once went round in circles for ever)."""
    from apportion.simulate.run import simulate

    ex = REPO / "examples" / "simulate"
    box = {}

    def hook(r):
        r.on_progress, r.progress_every = _bounded, 1000
        box["r"] = r

    res = simulate(ex / "nasa-3-tenants.yaml", NASA, ex / "nasa-3-tenants.map.yaml", arrivals=1.5, first=400,
                   on_replay=hook).result
    assert (res["jobs"], res["never_started"], res["unrunnable"]) == (400, 0, 0)


@pytest.mark.skipif(not CURIE.exists(), reason=f"needs {CURIE} (the shared traces beside the repository)")
def test_curie_slice_starts_every_job_and_keeps_up_with_easy(tmp_path):
    """CEA Curie's first 5,000 jobs, one consumer per group (the README's mapping, made
    from the whole trace), with the requested times: every job starts, none but those
    wider than the machine is unrunnable, and the plan's utilisation is at least 95% of
    the EASY baseline's on the same slots."""
    from apportion.simulate.baselines import baseline
    from apportion.simulate.cluster import cluster_from_info
    from apportion.simulate.run import _resolver, open_any
    from apportion.plan import compile_plan
    from apportion.traces.mapping import generate, render_map

    tr = open_any(CURIE)
    mapping, data = generate(tr, "group")
    data.update(cluster_from_info(tr.info, tr.info.processors))
    p = compile_plan(data)
    (tmp_path / "map.yaml").write_text(render_map(mapping), encoding="utf-8")
    resolve = _resolver(p, tmp_path / "map.yaml")
    jobs = list(itertools.islice(open_any(CURIE).jobs(), 5000))
    assert sum(j.walltime is not None for j in jobs) > 4000  # SWF field 9 is read
    r = Replay(p, iter(jobs), resolve)
    r.run()
    res = r.result()
    wider = sum(1 for j in jobs if j.slots > r.capacity or j.slots <= 0)
    assert (res["never_started"], res["unrunnable"]) == (0, wider)
    easy = baseline("easy", p, iter(jobs), resolve).result
    assert easy["never_started"] == 0
    assert res["utilisation"] >= 0.95 * easy["utilisation"], (res["utilisation"], easy["utilisation"])
