"""The SDK against a tiny FastAPI app on loopback: real HTTP, no mocks of httpx."""

from __future__ import annotations

import asyncio
import threading

import pytest

from apportion.client import ApportionError, AsyncClient, Client, MasterUnavailable, work
from tests.client.fake_master import Box, Log, Served, free_port, make_app, make_standby, make_starting


@pytest.fixture(scope="module")
def box():
    return Box(Log())


@pytest.fixture(scope="module")
def served(box):
    served = Served(make_app(box))
    yield served
    served.stop()


@pytest.fixture
def log(box):
    box.log = Log()
    return box.log


@pytest.fixture
def master(served, log):
    """One server for the module; each test gets a fresh log behind it."""
    yield served
    log.keep_open = False  # streams still open from this test end


def ids(events):
    return [e["id"] for e in events]


def take(stream, n, timeout=5.0):
    return [stream.next(timeout) for _ in range(n)]


def test_register_sends_the_token_from_the_environment(master, log, monkeypatch):
    monkeypatch.setenv("APPORTION_TOKEN", "secret-1")
    with Client(master.url) as api:
        assert api.register("app", "/Dev") == 7
    assert log.seen_auth[-1] == "Bearer secret-1"
    assert log.bodies[-1] == {"name": "app", "consumer": "/Dev"}


def test_token_argument_wins_then_token_file(master, log, monkeypatch, tmp_path):
    monkeypatch.delenv("APPORTION_TOKEN", raising=False)
    f = tmp_path / "admin.token"
    f.write_text("from-file\n")
    with Client(master.url, token_file=f) as api:
        api.register("a", "/A")
    with Client(master.url, token="from-arg", token_file=f) as api:
        api.register("a", "/A")
    assert log.seen_auth[-2:] == ["Bearer from-file", "Bearer from-arg"]


def test_a_refusal_is_an_apportion_error_with_status_and_detail(master):
    with Client(master.url, token="t") as api:
        with pytest.raises(ApportionError) as e:
            api.allocation(99)
        assert e.value.status == 404 and e.value.detail == "no allocation 99"
        with pytest.raises(ApportionError) as e:
            api.allocate("/Dev", "RG1", 5, 2, client=7)
        assert e.value.status == 422
        assert "body.min: min is above max" in str(e.value)


def test_allocate_sends_the_contract_fields(master, log):
    with Client(master.url, token="t") as api:
        got = api.allocate("/Dev", ["RG1", "RG2"], 1, 4, client=7, slots_per_instance=2,
                           requirement="select(slots > 1)")
    assert got["id"] == 1
    assert log.bodies[-1] == {"client": 7, "consumer": "/Dev", "group": ["RG1", "RG2"], "min": 1, "max": 4,
                              "slots_per_instance": 2, "exclusive": False, "requirement": "select(slots > 1)"}


def test_apply_plan_sends_the_text_as_is(master, log):
    with Client(master.url, token="t") as api:
        assert api.apply_plan("consumers: []\n") == {"version": 2}
    assert log.bodies[-1] == ("text/plain; charset=utf-8", "consumers: []\n")


def test_a_dead_url_moves_to_the_next(master):
    dead = f"http://127.0.0.1:{free_port()}"
    with Client([dead, master.url], token="t") as api:
        assert api.allocation(3)["id"] == 3
        assert api.master == master.url


def test_a_standby_503_moves_to_the_leader_it_names(master):
    standby = Served(make_standby(master.url))
    try:
        with Client(standby.url, token="t") as api:
            assert api.allocation(4)["id"] == 4
            assert api.master == master.url
    finally:
        standby.stop()


def test_a_master_that_is_starting_is_asked_again_until_retry_for_is_out():
    """A job's process whose call meets the master restarting waits for it, as DUCC's processes
    ride out a restart of the RM, instead of failing (and so failing the job) on the first 503."""
    app, answers = make_starting(3)
    starting, never = Served(app), Served(make_starting(10**9)[0])
    try:
        with Client(starting.url, token="t", retry_for=10) as api:
            assert work(api, job=1, process=2).exchange(want=1) == ([(0, "x")], False)
        assert answers == ["starting"] * 3 + ["items"]
        with Client(never.url, token="t", retry_for=0.3) as api:  # not ready within retry_for: the 503 is seen
            with pytest.raises(ApportionError) as e:
                work(api, job=1, process=2).exchange(want=1)
        assert e.value.status == 503 and "starting" in str(e.value)
    finally:
        starting.stop()
        never.stop()


def test_no_master_at_all_raises_master_unavailable_within_retry_for():
    dead = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    with Client(dead, token="t", retry_for=0.3) as api:
        with pytest.raises(MasterUnavailable) as e:
            api.allocation(1)
    assert e.value.status == 0 and "no master answered" in str(e.value)


def test_events_arrive_in_order_with_the_stream_open(master, log):
    for h in ("h1", "h2", "h3"):
        log.add("granted", allocation=1, host=h, slots=1)
    with Client(master.url, token="t") as api, api.events(7) as stream:
        got = take(stream, 3)
        log.add("reclaim", allocation=1, host="h1", slots=1, deadline=10.0, **{"for": "/Ops"})
        got.append(stream.next(5))
    assert ids(got) == [1, 2, 3, 4] and got[3]["for"] == "/Ops"


def test_events_resume_after_each_disconnect_none_lost_none_twice(master, log):
    log.per_connection = 2
    log.half_message = True   # each stream ends in the middle of a message
    log.repeat_last = True    # and each new one starts one event early
    for i in range(9):
        log.add("granted", allocation=1, host=f"h{i}", slots=1)
    with Client(master.url, token="t") as api, api.events(7) as stream:
        got = take(stream, 9)
        assert stream.reconnects >= 4
    assert ids(got) == list(range(1, 10))
    # every reconnect asked for what came after the last event handed out
    assert log.connections[0] is None
    assert [int(x) for x in log.connections[1:]] == sorted(int(x) for x in log.connections[1:])
    assert all(a == "Bearer t" for a in log.seen_auth)


def test_events_start_after_the_given_id(master, log):
    for i in range(5):
        log.add("granted", allocation=1, host=f"h{i}", slots=1)
    with Client(master.url, token="t") as api, api.events(7, after=3) as stream:
        assert stream.last_id == 3
        assert ids(take(stream, 1)) == [4]
        assert stream.last_id == 4  # what was handed out, though 5 may be read already
        assert ids(take(stream, 1)) == [5]
    assert log.connections == ["3"]


def test_events_survive_the_master_going_away_and_coming_back(log):
    first = Served(make_app(log))
    port = first.port
    log.add("granted", allocation=1, host="h1", slots=1)
    with Client(first.url, token="t") as api, api.events(7) as stream:
        assert ids(take(stream, 1)) == [1]
        first.stop()
        log.add("granted", allocation=1, host="h2", slots=1)  # while nobody serves
        second = Served(make_app(log), port=port)
        try:
            assert ids(take(stream, 1, timeout=10)) == [2]
        finally:
            second.stop()
    assert log.connections[-1] == "1"


def test_a_refused_stream_raises_to_the_reader(master):
    with Client(master.url, token="t") as api, api.events(404) as stream:
        with pytest.raises(ApportionError) as e:
            stream.next(5)
    assert e.value.status == 404


def test_next_with_a_timeout_raises_timeout_error_and_loses_nothing(master, log):
    with Client(master.url, token="t") as api, api.events(7) as stream:
        with pytest.raises(TimeoutError):
            stream.next(0.1)
        log.add("lost", allocation=1, host="h1", slots=1)
        assert stream.next(5)["type"] == "lost"


def test_iteration_ends_once_the_stream_is_closed(master, log):
    log.add("granted", allocation=1, host="h1", slots=1)
    with Client(master.url, token="t") as api:
        stream = api.events(7)
        first = stream.next(5)
        threading.Timer(0.05, stream.close).start()
        rest = list(stream)
    assert first["id"] == 1 and rest == []


def test_poll_events_long_polls(master, log):
    with Client(master.url, token="t") as api:
        assert api.poll_events(7, after=0, wait=0.05) == []
        log.add("granted", allocation=1, host="h1", slots=1)
        log.add("granted", allocation=1, host="h2", slots=1)
        assert ids(api.poll_events(7, after=1, wait=1)) == [2]


def test_async_client_same_calls_and_resuming_events(master, log):
    log.per_connection = 1
    log.half_message = True
    for i in range(4):
        log.add("granted", allocation=1, host=f"h{i}", slots=1)

    async def run():
        async with AsyncClient(master.url, token="t") as api:
            assert await api.register("a", "/A") == 7
            with pytest.raises(ApportionError):
                await api.allocation(99)
            got = []
            async with api.events(7) as stream:
                async for event in stream:
                    got.append(event)
                    if len(got) == 4:
                        break
                with pytest.raises(TimeoutError):
                    await stream.next(0.1)
            return got

    got = asyncio.run(asyncio.wait_for(run(), 10))
    assert ids(got) == [1, 2, 3, 4]


def test_async_client_follows_the_leader(master):
    standby = Served(make_standby(master.url))

    async def run():
        dead = f"http://127.0.0.1:{free_port()}"
        async with AsyncClient([dead, standby.url], token="t") as api:
            return (await api.allocation(5))["id"], api.master

    try:
        assert asyncio.run(run()) == (5, master.url)
    finally:
        standby.stop()


def test_a_job_process_waits_for_its_master_through_a_restart(monkeypatch):
    """A DUCC process's work loop keeps asking for MASTER_WAIT seconds, not the SDK's default
    10 s: a loaded master's restart took longer, the processes gave up before they had
    initialised, and three such ends failed the job."""
    from apportion.client._work import MASTER_WAIT, work

    monkeypatch.setenv("APPORTION_MASTER", "http://127.0.0.1:9")
    monkeypatch.setenv("APPORTION_TOKEN", "t")
    w = work(job=1, process=1)
    try:
        assert MASTER_WAIT >= 60 and w.client._retry_for == MASTER_WAIT
    finally:
        w.client.close()
