"""The audit trail and the access log (issue 18, "Why" 8): there was no record of who killed
an activity, closed a host, applied a plan or made a token, and stop_reason said "killed by
request" without saying by whom."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from tests.service.live import CLI, SLEEPER, host_state, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
  - {path: /B}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit")
    m = start_master(tmp / "m", PLAN)
    agent = start_agent(m, "h1", tmp / "h1", slots=2, extra=["--light"])
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
        yield m
    finally:
        agent.kill()
        m.proc.kill()


def trail(m, **params) -> list[dict]:
    with m.http() as c:
        r = c.get("/v1/audit", params=params)
        assert r.status_code == 200, r.text
        return r.json()["audit"]


def test_every_change_and_refusal_is_in_the_audit_with_who_did_it(world):
    m = world
    calls: dict[str, httpx.Response] = {}
    with m.http() as c:
        calls["make token"] = made = c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/A"})
        tok_a = made.json()
        tok_b = c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/B"}).json()
    with m.http(tok_a["token"]) as c:
        calls["client"] = r = c.post("/v1/clients", json={"name": "audited", "consumer": "/A"})
        client = r.json()["id"]
        calls["allocate"] = r = c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 1})
        aid = r.json()["id"]
        calls["refused patch"] = c.patch(f"/v1/allocations/{aid}", json={"min": 5})
        wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 20, "granted")
        act = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": SLEEPER}).json()["id"]
        calls["kill"] = c.post(f"/v1/activities/{act}/kill")
        stopped = c.get(f"/v1/activities/{act}").json()
        assert stopped["stop_reason"] == f"killed by request of token {tok_a['id']} (consumer /A)"
    with m.http(tok_b["token"]) as c:
        calls["403"] = c.delete(f"/v1/allocations/{aid}")
        assert calls["403"].status_code == 403
    calls["401"] = httpx.post(m.url + "/v1/clients", json={"name": "x", "consumer": "/A"})
    with m.http() as c:
        calls["close"] = c.post("/v1/hosts/h1/close")
        calls["open"] = c.post("/v1/hosts/h1/open")
        calls["plan"] = c.put("/v1/plan", content=PLAN + "  - {path: /C}\n", headers={"content-type": "text/plain"})
        calls["revoke"] = c.delete(f"/v1/tokens/{tok_b['id']}")
        calls["delete"] = c.delete(f"/v1/allocations/{aid}")
    rows = {r["request_id"]: r for r in trail(m)}
    # a call refused before authentication is counted in the metrics, not written (anyone could
    # grow the store at will): tests/service/test_refusals.py
    assert calls["401"].status_code == 401
    assert calls.pop("401").headers["x-request-id"] not in rows
    for what, r in calls.items():
        rid = r.headers["x-request-id"]
        assert rid in rows, f"{what} ({r.request.method} {r.request.url.path}) is not in the audit"
        row = rows[rid]
        assert row["method"] == r.request.method and row["path"] == r.request.url.path
        if r.status_code < 400:
            assert row["outcome"] == "done", (what, row)
        else:
            assert row["status"] == r.status_code and row["outcome"].startswith("refused"), (what, row)
    by_a = rows[calls["allocate"].headers["x-request-id"]]
    assert (by_a["token"], by_a["kind"], by_a["consumer"]) == (tok_a["id"], "consumer", "/A")
    assert by_a["objects"] == {"created": aid}
    assert rows[calls["kill"].headers["x-request-id"]]["objects"] == {"activities": act}
    assert rows[calls["make token"].headers["x-request-id"]]["objects"] == {"created": tok_a["id"]}
    # filters: a consumer's subtree, a token kind, a time, paging
    assert {r["consumer"] for r in trail(m, consumer="/A")} == {"/A"}
    assert {r["kind"] for r in trail(m, kind="admin")} == {"admin"}
    first = trail(m)[0]["id"]
    assert all(r["id"] > first for r in trail(m, after=first))
    assert trail(m, since=9e10) == []
    with m.http(tok_a["token"]) as c:
        assert c.get("/v1/audit").status_code == 403


def test_reads_and_agents_are_not_audited_and_ids_go_on_after_a_restart(world):
    m = world
    with m.http() as c:  # a row of its own: the tests of this module may run on other workers
        c.post("/v1/clients", json={"name": "before-reads", "consumer": "/A"})
    before = trail(m)
    with m.http() as c:
        c.get("/v1/hosts")
        c.get("/v1/allocations")
    assert trail(m) == before  # agents heartbeat all along: not audited either
    m.restart()
    with m.http() as c:
        r = c.post("/v1/clients", json={"name": "after-restart", "consumer": "/A"})
    after = trail(m, after=before[-1]["id"])
    assert [x["request_id"] for x in after] == [r.headers["x-request-id"]]


def test_the_cli_reads_the_audit_and_the_access_log_has_a_line_per_request(world):
    m = world
    with m.http() as c:  # an admin's row of its own: the tests of this module may run on other workers
        c.post("/v1/clients", json={"name": "for-the-cli", "consumer": "/A"})
    r = subprocess.run([*CLI, "audit", "--master", m.url, "--token-file", str(m.workdir / "admin.token"), "--json",
                        "--kind", "admin"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["audit"]
    assert rows and {x["kind"] for x in rows} == {"admin"}
    with m.http() as c:  # a local process cannot name another client in the log
        rid = c.get("/v1/hosts", headers={"X-Forwarded-For": "203.0.113.9"}).headers["x-request-id"]
    lines = [json.loads(x) for x in m.proc.output().splitlines() if x.startswith("{")]

    def logged():
        return [x for x in (json.loads(y) for y in m.proc.output().splitlines() if y.startswith("{"))
                if x.get("logger") == "apportion.access" and x.get("request_id") == rid]
    line = wait_until(logged, 10, "the access line")[0]
    assert line["method"] == "GET" and line["path"] == "/v1/hosts" and line["status"] == 200
    assert line["kind"] == "admin" and isinstance(line["ms"], float)
    assert line["client"] == "127.0.0.1", line
    assert lines


def test_access_lines_are_json_whatever_the_path_and_go_out_once_per_turn():
    """The access line is written out by hand (no encoder): it must still be one JSON object
    with the fields, whatever a path holds, and a turn's lines go to logging as one record."""
    import asyncio
    import logging
    import time

    from apportion.cli.server import JsonLines
    from apportion.service.app import AccessLines, access
    from apportion.service.auth import Principal

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep()
    access.addHandler(keep)
    old = access.level
    access.setLevel(logging.INFO)
    paths = ['/v1/clients/"quoted"\\x', "/v1/h\u00f4tes/\u2603\n\t\x01", "/v1/allocations/5"]
    try:
        async def turn() -> None:
            lines = AccessLines()
            for i, path in enumerate(paths):
                scope = {"method": "DELETE", "path": path, "client": ("10.0.0.1", 5)}
                state = {"principal": Principal("consumer", "/A", token=7)} if i else {}
                lines.add(scope, state, f"r-{i}", 404 if i else 401, time.perf_counter())
            await asyncio.sleep(0)  # the turn ends: its lines are written
            await asyncio.sleep(0)
        asyncio.run(turn())
    finally:
        access.removeHandler(keep)
        access.setLevel(old)
    assert len(records) == 1
    out = JsonLines().format(records[0]).split("\n")
    got = [json.loads(x) for x in out]
    assert [x["path"] for x in got] == paths
    assert [x["request_id"] for x in got] == ["r-0", "r-1", "r-2"]
    assert got[0]["token"] is None and got[0]["kind"] is None and got[0]["status"] == 401
    assert got[1]["token"] == 7 and got[1]["kind"] == "consumer" and got[1]["client"] == "10.0.0.1"
    assert all(x["logger"] == "apportion.access" and x["method"] == "DELETE" and isinstance(x["ms"], float)
               and x["msg"] == f"DELETE {x['path']} {x['status']}" for x in got)
