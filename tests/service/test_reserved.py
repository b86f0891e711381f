"""The allocations the API shows reserved, with their planned start, from the engine's
reservations after each cycle (service/reserved.py); and how the CLI writes them."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

from apportion.cli.live import _reservation_text
from apportion.engine import Engine, Request
from apportion.service import reserved
from apportion.service.published import AllocationPub
from tests.engine.builders import make_plan


def _alloc(aid: int, mn: int) -> AllocationPub:
    return AllocationPub(aid, 1, "/A", ["RG"], mn, mn, 1, False, None, [], aid, 0.0)


def test_a_waiting_rigid_allocation_is_marked_reserved_with_its_planned_start_then_unmarked():
    e = Engine(make_plan({"/A": {"share_ratio": 1}}, hosts=1, slots=8))
    m = SimpleNamespace(engine=e, allocations={1: _alloc(1, 6), 2: _alloc(2, 8)})
    mark = reserved.observer(m)
    t0 = 1_700_000_000.0
    e.submit(Request("1", "/A", max=6, min=6, seq=1, walltime=600.0))
    e.submit(Request("2", "/A", max=8, min=8, seq=2))
    for t in (t0, t0 + 1):
        mark(e.cycle(t), 0.0)
    one, two = m.allocations[1].json(), m.allocations[2].json()
    assert (one["reserved"], one["planned_start"]) == (False, None)
    assert (two["reserved"], two["planned_start"]) == (True, t0 + 600.0)  # when 1 ends, by its walltime
    e.release("1")
    mark(e.cycle(t0 + 2), 0.0)
    two = m.allocations[2].json()
    assert (two["reserved"], two["planned_start"]) == (False, None)  # started
    assert e.report().requests["2"] == {"h1": 8}


def test_a_master_without_reservations_marks_nothing():
    for m in (SimpleNamespace(engine=object(), allocations={1: _alloc(1, 6)}),
              SimpleNamespace(allocations={1: _alloc(1, 6)})):  # DUCC's master: no EGO engine
        reserved.observer(m)(None, 0.0)
        assert m.allocations[1].json()["reserved"] is False


def test_the_cli_says_reserved_and_the_planned_start_in_local_time():
    t = 1_700_000_000.0
    assert _reservation_text({"reserved": False, "planned_start": None}) == "-"
    assert _reservation_text({}) == "-"  # an older master
    assert _reservation_text({"reserved": True, "planned_start": None}) == "reserved, start unknown"
    stamp = datetime.fromtimestamp(t).strftime("%H:%M:%S")
    assert _reservation_text({"reserved": True, "planned_start": t}) == f"reserved, planned start at {stamp}"
