"""One rule for strings, and one request never stops the master.

No string the API or the agent protocol takes may hold a NUL byte (PostgreSQL's text refuses
it, SQLite keeps it: the same request would be kept by one store and stop the other) or a lone
surrogate; names and one-line texts refuse every control character. Each is a 422 naming the
field, the same on both stores, and the master goes on. A request that still reaches the
store with data it refuses fails alone: its batch-mates are committed without it."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import select

from apportion.agent.protocol import Start
from apportion.service.master import Master, Op
from apportion.service.published import ClientPub
from apportion.service.refusal import ApiError
from apportion.service.store.db import make_engine, upgrade
from apportion.service.store.models import ClientRow
from apportion.service.store.writer import StoreWriter
from tests.service.live import host_state, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
  - {path: /B}
"""


def _loc(r: httpx.Response) -> list:
    assert r.status_code == 422, (r.status_code, r.text)
    return r.json()["detail"][0]["loc"]


def test_nul_and_control_characters_are_a_422_naming_the_field_on_both_stores(tmp_path, db_url):
    m = start_master(tmp_path / "m", PLAN, db=db_url)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=2, extra=["--light"])
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            tenant = c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/A"}).json()["token"]
            client = c.post("/v1/clients", json={"name": "app", "consumer": "/A"}).json()["id"]
            alloc = {"client": client, "consumer": "/A", "max": 1}
            # the report: a consumer token's allocation with a NUL inside its requirement
            with m.http(tenant) as t:
                for _ in range(3):  # as often as one likes
                    assert _loc(t.post("/v1/allocations", json={**alloc, "requirement": "select(slots > 0)\x00"})) \
                        == ["body", "requirement"]
            assert _loc(c.post("/v1/allocations", json={**alloc, "requirement": "select(slots > 0)\x1b[2J"})) \
                == ["body", "requirement"]
            # an agent's register with a NUL in its OS name, or in an attribute
            reg = {"slots": 2, "memory": 1.0}
            assert _loc(c.post("/v1/agents/h9/register", json={**reg, "os": "Linux\x00"})) == ["body", "os"]
            assert _loc(c.post("/v1/agents/h9/register", json={**reg, "attributes": {"rack": "r\x00"}}))[:3] \
                == ["body", "attributes", "rack"]
            # a lone surrogate is not UTF-8: neither store can keep it
            raw = b'{"client": %d, "consumer": "/A", "max": 1, "requirement": "select(slots > 0) \\ud800"}' % client
            r = c.post("/v1/allocations", content=raw, headers={"Content-Type": "application/json"})
            assert _loc(r) == ["body", "requirement"]
            # tab and newline mean something in an argument: kept
            ok = c.post("/v1/allocations", json=alloc)
            assert ok.status_code == 201, ok.text
            aid = ok.json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 20, "granted")
            assert _loc(c.post(f"/v1/allocations/{aid}/activities",
                               json={"host": "h1", "argv": ["true"], "cwd": "/tmp\x00"}))[:2] == ["body", "cwd"]
            act = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": ["echo", "a\tb\nc"]})
            assert act.status_code == 201, act.text
            # nothing was stored of the refused calls, and the master goes on
            assert [a["id"] for a in c.get("/v1/allocations").json()["allocations"]] == [aid]
            assert "h9" not in {h["name"] for h in c.get("/v1/hosts").json()["hosts"]}
            assert c.get("/readyz").status_code == 200
            # the refusals are audited, on both stores
            outcomes = [a["outcome"] for a in c.get("/v1/audit").json()["audit"] if a["status"] == 422]
            assert sum("requirement" in o for o in outcomes) >= 3, outcomes
        assert m.proc.alive
    finally:
        agent.kill()
        m.proc.kill()


# -- a request whose data the store refuses fails alone -------------------------------------------------
def _master(url: str) -> Master:
    engine = make_engine(url)
    upgrade(engine)
    w = StoreWriter(engine)
    w.put_first_plan(PLAN, "test")
    return Master(w, w.load())


def _stored_clients(m: Master) -> list[str]:
    with m.writer.engine.connect() as c:
        return sorted(r.name for r in c.execute(select(ClientRow)))


def _step(m: Master, fns: list) -> list:
    async def go() -> list:
        loop = asyncio.get_running_loop()
        ops = [Op(fn, loop.create_future()) for fn in fns]
        await m._step(ops)
        return [op.future.exception() or op.future.result() for op in ops]
    return asyncio.run(go())


def test_a_request_the_store_refuses_fails_alone_and_its_batch_mates_are_committed(db_url):
    m = _master(db_url)

    def broken(batch, now):  # an error of the master's own, after a change: the engine may be half-changed
        m.clients[999] = ClientPub(999, "ghost", "/A", now)
        raise RuntimeError("a bug")

    # the store refuses the second's name (not UTF-8): its batch-mates go on without it
    got = _step(m, [m.op_register_client("one", "/A"), m.op_register_client("bad\ud800", "/A"), broken,
                    m.op_register_client("two", "/B")])
    assert isinstance(got[0], ClientPub) and got[0].name == "one"
    assert isinstance(got[1], ApiError) and got[1].status == 422 and "store refused" in got[1].detail
    assert isinstance(got[2], ApiError) and got[2].status == 500
    assert isinstance(got[3], ClientPub) and got[3].name == "two"
    assert _stored_clients(m) == ["one", "two"]
    # what the master shows is what the store holds: nothing of the refused or the broken one
    assert sorted(c.name for c in m.clients.values()) == ["one", "two"]
    assert m.store_down is None
    # and it goes on: the next batch is committed
    got = _step(m, [m.op_register_client("three", "/A")])
    assert isinstance(got[0], ClientPub)
    assert _stored_clients(m) == ["one", "three", "two"]
    # a request alone in its batch is refused alone
    got = _step(m, [m.op_register_client("nul\x00", "/A")])
    if db_url.startswith("sqlite"):  # SQLite keeps a NUL (the API refuses it at the door: the test above)
        assert isinstance(got[0], ClientPub)
    else:
        assert isinstance(got[0], ApiError) and got[0].status == 422
        assert _stored_clients(m) == ["one", "three", "two"]
    assert m.store_down is None
    m.writer.engine.dispose()


def test_a_consumer_token_for_every_tenant_is_refused(tmp_path):
    m = start_master(tmp_path / "m", PLAN)
    try:
        with m.http() as c:
            assert _loc(c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/"})) == ["body", "consumer"]
            assert all(t["consumer"] != "/" for t in c.get("/v1/tokens").json()["tokens"])
            assert c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/A"}).status_code == 201
    finally:
        m.proc.kill()


def test_the_agent_holds_the_rule_for_the_start_commands_it_reads():
    ok = Start.from_json({"activity": 1, "argv": ["echo", "a\tb\n"], "env": {"K": "v\n"}, "cwd": "/tmp"})
    assert ok.argv == ["echo", "a\tb\n"] and ok.env == {"K": "v\n"}
    for bad, field in (({"argv": ["echo", "a\x00"]}, "argv[1]"), ({"env": {"K": "v\x00"}}, "env.K"),
                       ({"cwd": "/tmp\udc80"}, "cwd"), ({"user": "no\x00body"}, "user"),
                       ({"limits": {"memory": 1e300}}, "limits.memory")):
        with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
            Start.from_json({"activity": 1, "argv": ["true"], **bad})


def test_a_client_name_tells_no_tenant_of_another_tenants_client(tmp_path, db_url):
    m = start_master(tmp_path / "m", PLAN, db=db_url)
    try:
        with m.http() as c:
            tok = {p: c.post("/v1/tokens", json={"kind": "consumer", "consumer": p}).json()["token"] for p in ("/A", "/B")}
        with m.http(tok["/A"]) as a, m.http(tok["/B"]) as b:
            mine = a.post("/v1/clients", json={"name": "app", "consumer": "/A"})
            assert mine.status_code == 201
            # B registering the same name learns nothing: it gets a client of its own
            theirs = b.post("/v1/clients", json={"name": "app", "consumer": "/B"})
            assert theirs.status_code == 201, theirs.text
            assert theirs.json()["id"] != mine.json()["id"] and theirs.json()["consumer"] == "/B"
            # registering again under the same consumer is the same client
            assert a.post("/v1/clients", json={"name": "app", "consumer": "/A"}).json()["id"] == mine.json()["id"]
            assert [x["id"] for x in b.get("/v1/clients").json()["clients"]] == [theirs.json()["id"]]
        m.restart()
        with m.http(tok["/B"]) as b:
            assert b.post("/v1/clients", json={"name": "app", "consumer": "/B"}).json()["id"] == theirs.json()["id"]
    finally:
        m.proc.kill()


def test_a_store_of_the_version_before_keeps_its_clients_and_takes_a_name_per_consumer(db_url):
    from alembic import command
    from sqlalchemy import insert

    from apportion.service.store.db import alembic_config

    engine = make_engine(db_url)
    cfg = alembic_config(db_url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0005")
    with engine.begin() as c:
        c.execute(insert(ClientRow).values(id=1, name="app", consumer="/A", created_at=0.0))
    upgrade(engine)
    with engine.begin() as c:
        c.execute(insert(ClientRow).values(id=2, name="app", consumer="/B", created_at=0.0))
    with engine.connect() as c:
        assert sorted((r.id, r.consumer) for r in c.execute(select(ClientRow))) == [(1, "/A"), (2, "/B")]
    with pytest.raises(Exception, match="(?i)unique"), engine.begin() as c:  # still one per consumer
        c.execute(insert(ClientRow).values(id=3, name="app", consumer="/A", created_at=0.0))
    engine.dispose()
