"""Settling at one moment ends: with a grace of 0, a reclaim completes in the very next
cycle, so work that is started, reclaimed and started again would circle for ever
without the clock moving. Requests (rigid and elastic, some with a walltime) arrive one
at a time on small seeded plans of owners that lend or not and consumers that own
nothing; after each, the engine must reach a cycle that decides nothing."""

from __future__ import annotations

import random

import pytest

from apportion.engine import Engine, Request
from apportion.scenario.runner import advance, settle
from tests.simulate.helpers import plan


def _case(draw_int, draw_choice, draw_bool):
    n = draw_int(1, 4)
    hosts, per = draw_int(1, 3), draw_int(2, 8)
    cap = hosts * per
    consumers = [{"path": f"/c{i}", "share_ratio": draw_int(1, 3), "grace": draw_choice([0, 0, 5])}
                 for i in range(n)]
    left = cap
    for c in consumers:
        owned = draw_int(0, left) if draw_bool() else 0
        if owned:
            c.update(owned=owned, lend=draw_bool())
            left -= owned
    t = 0.0
    requests = []
    for i in range(draw_int(1, 10)):
        t += draw_choice([0.0, 1.0, 7.0])
        most = draw_int(1, cap)
        rigid = draw_bool()
        walltime = draw_choice([None, 10.0, 100.0])
        requests.append((t, Request(id=f"r{i}", consumer=f"/c{draw_int(0, n - 1)}", max=most,
                                    min=most if rigid else 0, walltime=walltime)))
    return plan(consumers, cap, hosts=hosts), requests


def _replay(p, requests) -> Engine:
    e = Engine(p)
    for t, req in requests:
        advance(e, t)
        e.submit(req)
        settle(e, t)  # raises SettleError after 1,000 cycles that all decided something
    return e


def _seeded(seed: int):
    rnd = random.Random(seed)
    return _case(rnd.randint, rnd.choice, lambda: rnd.random() < 0.5)


# Cases a search over seeded plans found circling, each for a reason of its own:
#  63: a started rigid job that its owner took a slot back from kept the rest below its
#      min, waited again, and its reservation took the owner's slot back for it;
#  93: slots reclaimed for fairness for a consumer went to its earlier rigid request,
#      which could not start, and were lent out and reclaimed again;
# 256: a reclaim for a rigid request counted idle slots another consumer owns and does
#      not lend;
# 345: an owner took a lent slot back for elastic work behind its own rigid request,
#      which the slot went to and which could not start;
# 591: a reservation moved to another consumer while the slots it had reclaimed were
#      coming free, leaving them to the work they were reclaimed from;
# 305: a slot reclaimed for fairness for a consumer's narrow rigid request went first to
#      its earlier wide one, which could not start; kept for that one's reservation, it
#      was lent to elastic work and reclaimed again;
# 19065: elastic work lent a reservation's slot was moved by the books onto its own
#      consumer's slots; the reservation, counting it, reclaimed it, and it came back;
# 26285: a reservation whose min idle slots of a lender make up was called not ready:
#      the slots reclaimed for it went to elastic work meanwhile, to be reclaimed again;
# 47730: an owner took a lent slot back for its rigid request, which waited for more on
#      their way; a reservation's last call borrowed the slot from it again;
# 94975: a reservation that was ready, waiting for one slot on its way, moved to another
#      consumer, whose elastic work took the slots kept; back, it reclaimed them again;
# 155716: a slot reclaimed for a consumer's elastic request went to its reservation ahead
#      of it, which could not start with it, and elastic work on the kept slot was
#      reclaimed again;
# 188959: a consumer's rigid request waited for slots reclaimed with a grace; one
#      reclaimed from work with none came free first and sat idle, was lent to elastic
#      work on another consumer's reservation and reclaimed again for the first.
@pytest.mark.parametrize("seed", [63, 93, 256, 345, 591, 305, 19065, 26285, 47730, 94975, 155716, 188959])
def test_cases_that_circled_settle(seed):
    _replay(*_seeded(seed))


def test_seeded_plans_settle():
    """4,000 plans of the search above: none circles, and no host is given more than it has."""
    for seed in range(4000):
        e = _replay(*_seeded(seed))
        for name, h in e.state.hosts.items():
            assert 0 <= h.free <= h.host.slots, (seed, name)
