"""The soak's short form (issue 18): two minutes of a real master, 20 agents, mixed work,
SIGKILLs of the master, agents and processes, and hostile requests; every invariant holds
(apportion bench soak runs the long form; docs/performance.md has its figures)."""

from __future__ import annotations

import pytest

from apportion.bench.soak import run_soak


@pytest.mark.slow
def test_two_minutes_of_faults_and_hostile_requests_break_no_invariant(tmp_path):
    r = run_soak(2.0, workdir=tmp_path)
    assert r["violations"] == [], r
    assert r["5xx"] == 0
    assert r["restarts"].get("master", 0) >= 1 and r["restarts"].get("agent", 0) >= 1
    assert r["hostile"] >= 50 and r["requests"] >= 1000
    assert r["ids"]["allocation"] >= 20 and r["ids"]["activity"] >= 50 and r["ids"]["token"] >= 1
    assert r["events_checked"] >= 100 and r["writes_audited"] >= 100
