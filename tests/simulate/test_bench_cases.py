"""`apportion bench simulate`'s Curie case on a part of the trace (--jobs N)."""

from __future__ import annotations

import pytest

from apportion.bench import simulate_bench as sb

pytestmark = pytest.mark.skipif(not (sb.TRACES / sb.CURIE).exists(),
                                reason="needs ../shared/traces beside the repository (not here)")


def test_curie_replays_only_the_first_jobs_asked_for():
    out = sb.child_curie(sb.TRACES, 6000)
    assert out["arrived"] == 6000
    assert out["consumers"] >= 300  # the mapping is still made from the whole trace
    assert out["events"] >= out["arrived"]
    assert out["cycles_not_run"] is not None and out["cycles_not_run"] <= out["cycles"]
    # Curie's plan is the plainest kind: once work queues (after some 3,000 jobs),
    # cycles certain to decide nothing end after their views
    assert 0 < out["cycles_cut_short"] <= out["cycles"] - out["cycles_not_run"]
