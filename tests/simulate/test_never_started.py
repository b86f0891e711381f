"""Rigid jobs never strand: every job that fits what its consumer may ever use starts
before the replay ends (``never_started`` 0), on random small traces and on a slice of
CEA Curie beside the EASY baseline."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.simulate.replay import Replay
from apportion.traces.record import TraceJob
from tests.simulate.helpers import by_user, plan, shared_traces

CURIE = shared_traces() / "CEA-Curie-2011-2.1-cln.swf.gz"


@st.composite
def _cases(draw):
    n_consumers = draw(st.integers(1, 4))
    hosts = draw(st.integers(1, 3))
    per_host = draw(st.integers(2, 8))
    capacity = hosts * per_host
    consumers = [{"path": f"/c{i}", "share_ratio": draw(st.integers(1, 3)), "grace": draw(st.sampled_from([0, 5]))}
                 for i in range(n_consumers)]
    jobs = []
    t = 0.0
    for i in range(draw(st.integers(1, 25))):
        t += draw(st.sampled_from([0.0, 0.0, 1.0, 7.0, 40.0]))
        run = float(draw(st.integers(1, 100)))
        walltime = draw(st.one_of(st.none(), st.floats(1.0, 200.0)))  # an estimate, right or wrong
        jobs.append(TraceJob(id=str(i), submit=t, run=run, slots=draw(st.integers(1, capacity)),
                             user=f"u{draw(st.integers(0, n_consumers - 1))}", walltime=walltime))
    return consumers, hosts, capacity, jobs


@settings(max_examples=120, deadline=None)
@given(_cases())
def test_every_rigid_job_that_fits_starts(case):
    consumers, hosts, capacity, jobs = case
    p = plan(consumers, capacity, hosts=hosts)
    r = Replay(p, jobs, by_user({f"u{i}": f"/c{i}" for i in range(len(consumers))}))
    r.run()
    res = r.result()
    # a job of a few slots spans hosts as a rigid request may: none is wider than its consumer's room
    assert res["unrunnable"] == 0
    assert res["never_started"] == 0, res["consumers"]
    assert sum(c["jobs"] for c in res["consumers"].values()) == len(jobs)


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
