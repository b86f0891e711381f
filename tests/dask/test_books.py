"""The cluster's bookkeeping alone: which workers start where, which go for a reclaim or a
scale-down, and that a slot is never counted twice (no Dask, no master needed)."""

from __future__ import annotations

import pytest

from apportion.dask.books import BACKOFF_FIRST, Books


def books_with(*hosts: str, worker_slots: int = 1) -> Books:
    b = Books(worker_slots)
    for i, host in enumerate(hosts, start=1):
        b.add(i, f"w-{i}", host)
    return b


def test_workers_start_on_unused_slots_up_to_what_is_wanted() -> None:
    b = books_with("h1")
    assert b.starts({"h1": 2, "h2": 2}, wanted=4, now=0) == {"h1": 1, "h2": 2}
    assert b.starts({"h1": 2, "h2": 2}, wanted=2, now=0) == {"h1": 1}
    assert b.starts({"h1": 2, "h2": 2}, wanted=1, now=0) == {}


def test_whole_workers_only() -> None:
    b = Books(worker_slots=2)
    assert b.starts({"h1": 3, "h2": 1}, wanted=5, now=0) == {"h1": 1}
    with pytest.raises(ValueError, match="worker_slots"):
        Books(worker_slots=0)


def test_a_reclaim_takes_unused_slots_first_then_connected_workers_newest_first() -> None:
    b = books_with("h1", "h1", "h1")
    b.note_connected("w-1", "tcp://a:1")
    b.note_connected("w-2", "tcp://a:2")
    # 4 held, 3 workers: one slot is unused, so a reclaim of 2 retires one worker, the newest connected
    assert [w.name for w in b.choose_for_reclaim("h1", 2, held_there=4)] == ["w-2"]
    assert [w.name for w in b.choose_for_reclaim("h1", 1, held_there=4)] == []
    assert [w.name for w in b.choose_for_reclaim("h1", 4, held_there=4)] == ["w-2", "w-1", "w-3"]


def test_slots_given_back_are_not_started_on_and_not_counted_twice() -> None:
    b = books_with("h1", "h1")
    victims = b.choose_for_reclaim("h1", 1, held_there=2)
    b.retire(victims, "reclaim")
    assert victims[0].retiring == "reclaim" and not victims[0].active
    assert b.unused({"h1": 2}) == {}
    assert b.starts({"h1": 2}, wanted=2, now=0) == {}
    b.note_activity(victims[0].activity, "exited", exit_code=0)
    assert b.starts({"h1": 2}, wanted=2, now=0) == {}  # ended, but its slot is still being given back
    b.released("h1", 1)
    assert b.unused({"h1": 1}) == {}  # the master holds one slot less now
    assert b.unused({"h1": 2}) == {"h1": 1}


def test_scale_down_prefers_workers_not_yet_connected_then_the_schedulers_choice() -> None:
    b = books_with("h1", "h1", "h2", "h2")
    for i in (1, 2, 3):
        b.note_connected(f"w-{i}", f"tcp://x:{i}")
    assert [w.name for w in b.choose_for_scale(3)] == ["w-4"]
    assert [w.name for w in b.choose_for_scale(1, ranked=["w-1", "w-3"])] == ["w-4", "w-1", "w-3"]
    assert b.choose_for_scale(4) == []


def test_a_worker_that_ends_by_itself_keeps_its_host_quiet_with_backoff() -> None:
    b = books_with("h1")
    w = b.note_activity(1, "exited", exit_code=1, now=100.0)
    assert w is not None and w.name == "w-1"
    assert b.starts({"h1": 1}, wanted=1, now=100.0) == {}
    assert b.starts({"h1": 1}, wanted=1, now=100.0 + BACKOFF_FIRST) == {"h1": 1}
    b.add(2, "w-2", "h1")
    b.note_activity(2, "exited", exit_code=1, now=200.0)
    assert b.quiet_until["h1"] == 200.0 + 2 * BACKOFF_FIRST
    b.add(3, "w-3", "h1")
    b.note_connected("w-3", "tcp://x:3")  # a worker that connects ends the backoff
    assert "h1" not in b.quiet_until and "h1" not in b.failures


def test_an_end_we_asked_for_is_no_failure_and_an_end_is_final() -> None:
    b = books_with("h1", "h1")
    b.retire([b.workers[1]], "scale")
    assert b.note_activity(1, "exited", exit_code=0) is None
    assert b.note_activity(2, "lost") is None  # its host went down: not the worker's fault
    b.note_activity(2, "running")
    assert b.workers[2].state == "lost"
    assert b.quiet_until == {}


def test_forced_means_a_signal_was_sent_or_died_of() -> None:
    b = books_with("h1", "h1", "h1")
    b.note_activity(1, "exited", exit_code=0)
    b.note_activity(2, "exited", exit_code=0, stopping=True, stop_reason="reclaimed")
    b.note_activity(3, "killed", signal=9)
    assert [w.forced for w in b.workers.values()] == [False, True, True]
