"""The SDK, the CLI and keep_workers.py against a real master and a real agent on loopback."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from apportion.cli import live
from apportion.cli.main import app
from apportion.client import ApportionError, AsyncClient, Client
from tests.service.live import CLI, Proc, start_agent, start_master, wait_until

ROOT = Path(__file__).resolve().parents[2]
PLAN = (ROOT / "examples" / "service" / "plan.yaml").read_text()


def _quick_start(workdir: Path):
    """The README's quick start: a master on examples/service/plan.yaml and one agent with 4 slots."""
    m = start_master(workdir / "m", PLAN)
    agent = start_agent(m, "host1", workdir / "host1", slots=4)
    m.agent = agent  # for the tests that stop and start it
    try:
        with Client(m.url, token=m.token) as api:
            wait_until(lambda: [h for h in api.hosts() if h["name"] == "host1" and h["state"] == "ok"], 20,
                       "host1 reported")
        yield m
    finally:
        agent.kill()
        m.proc.kill()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    yield from _quick_start(tmp_path_factory.mktemp("live"))


@pytest.fixture
def cluster(shared_cluster):
    """The shared cluster, left as found: every allocation deleted and host1 all free again."""
    m = shared_cluster
    yield m
    with Client(m.url, token=m.token) as api:
        for a in api.allocations():
            api.delete(a["id"])
        wait_until(lambda: [h for h in api.hosts() if h["free"] == h["slots"]], 20, "host1 free again")


def cli(m, *args: str, token: str | None = None, anonymous: bool = False) -> Result:
    """The ``apportion`` command, in this process (real HTTP to the master, no process start-up)."""
    live.out.width = live.err.width = 200  # wide tables whatever the terminal (or none, under xdist)
    env = {"APPORTION_MASTER": m.url, "APPORTION_TOKEN": None if anonymous else (token or m.token),
           "APPORTION_TOKEN_FILE": None, "COLUMNS": "200", "APPORTION_RETRY_FOR": "2"}
    r = CliRunner().invoke(app, list(args), env=env)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    r.returncode = r.exit_code
    return r


def cli_process(m, *args: str) -> subprocess.CompletedProcess:
    """The ``apportion`` command as a user runs it: its own process."""
    env = {"APPORTION_MASTER": m.url, "APPORTION_TOKEN": m.token, "PATH": "/usr/bin:/bin"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)


def test_register_allocate_granted_event_cli_and_release(cluster, tmp_path):
    m = cluster
    with Client(m.url, token=m.token) as api:
        me = api.register("sdk-test", "/Apps/batch")
        assert api.register("sdk-test", "/Apps/batch") == me  # the same name is the same client
        alloc = api.allocate("/Apps/batch", "Workers", 1, 2)
        with api.events(me) as stream:
            granted = stream.next(timeout=20)
            while granted["type"] != "granted":
                granted = stream.next(timeout=20)
            assert granted["allocation"] == alloc["id"] and granted["host"] == "host1"
            assert granted["slots"] == 2

            r = cli_process(m, "alloc", "list", "--json")
            assert r.returncode == 0, r.stderr
            listed = {a["id"]: a for a in json.loads(r.stdout)["allocations"]}
            assert listed[alloc["id"]]["hosts"] == {"host1": 2}
            assert listed[alloc["id"]]["held"] == 2

            r = cli(m, "rg", "Workers", "--json")
            assert r.returncode == 0, r.stderr
            rows = {row["consumer"]: row for row in json.loads(r.stdout)["consumers"]}
            assert rows["/Apps/batch"]["held"] == 2 and rows["/Ops"]["owned"] == 2

            r = cli(m, "rg", "Workers")  # EGO's columns as a table
            assert r.returncode == 0 and "SHORTFALL" in r.stdout and "/Apps/batch" in r.stdout

            act = api.start_activity(alloc["id"], "host1", [sys.executable, "-c", "print('hi from host1')"])
            ended = wait_until(lambda: api.activity(act["id"])["state"] == "exited" and api.activity(act["id"]),
                               20, "the activity to end")
            assert ended["exit_code"] == 0
            assert api.activity_output(act["id"])["stdout"] == ["hi from host1"]
            seen = [stream.next(timeout=20) for _ in range(3)]  # starting, running, exited: in order
            assert [e["state"] for e in seen if e["type"] == "activity"][-1] == "exited"

            held = api.allocation(alloc["id"])["held"]
            with pytest.raises(ApportionError) as empty:  # an empty map is refused, never "everything"
                api.release(alloc["id"], slots={})
            assert empty.value.status == 422 and api.allocation(alloc["id"])["held"] == held > 0
            api.release(alloc["id"])
            wait_until(lambda: api.allocation(alloc["id"])["held"] == 0, 20, "the slots given back")
            api.delete(alloc["id"])
        with pytest.raises(ApportionError) as e:
            api.allocation(alloc["id"])
        assert e.value.status == 404


def test_async_client_register_allocate_granted_and_delete(cluster):
    m = cluster

    async def run():
        async with AsyncClient(m.url, token=m.token) as api:
            me = await api.register("async-test", "/Apps/web")
            alloc = await api.allocate("/Apps/web", "Workers", 1, 1)
            async with api.events(me) as stream:
                event = await stream.next(20)
                while event["type"] != "granted":
                    event = await stream.next(20)
            assert event["allocation"] == alloc["id"] and event["slots"] == 1
            assert (await api.allocation(alloc["id"]))["hosts"] == {"host1": 1}
            assert [r for r in await api.consumers() if r["consumer"] == "/Apps/web"][0]["held"] == 1
            await api.delete(alloc["id"])
            with pytest.raises(ApportionError) as e:
                await api.change(alloc["id"], max=3)
            return e.value.status

    assert asyncio.run(asyncio.wait_for(run(), 30)) == 404


def test_cli_errors_print_the_detail_and_exit_non_zero(cluster, tmp_path):
    m = cluster
    r = cli(m, "alloc", "view", "999")
    assert r.returncode == 1 and "no allocation 999" in r.stderr and "Traceback" not in r.stderr
    r = cli(m, "host", "list", anonymous=True)
    assert r.returncode == 1 and "401" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("resource_groups:\n  - {name: Workers, select: 'select(slots >'}\nconsumers:\n  - {path: Apps}\n")
    r = cli(m, "plan", "apply", str(bad))
    assert r.returncode == 1 and "problem(s)" in r.stderr, r.stderr
    assert "line 2" in r.stderr and "line 4" in r.stderr  # every problem, each with its line
    shown = json.loads(cli(m, "plan", "show", "--json").stdout)
    assert shown["version"] == 1 and shown["text"] == PLAN  # the refused plan changed nothing
    r = subprocess.run([*CLI, "host", "list", "--master", "http://127.0.0.1:9"], capture_output=True, text=True,
                       timeout=60, env={"APPORTION_TOKEN": "x", "APPORTION_RETRY_FOR": "0.2", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 3 and "no master answered" in r.stderr and "Traceback" not in r.stderr


def test_cli_hosts_tokens_events_activities_and_free(cluster, tmp_path):
    m = cluster
    with Client(m.url, token=m.token) as api:
        me = api.register("cli-test", "/Apps/web")
        alloc = api.allocate("/Apps/web", "Workers", 0, 2, client=me)["id"]
        wait_until(lambda: api.allocation(alloc)["held"] == 2, 20, "web granted 2")
        act = api.start_activity(alloc, "host1", [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])

    r = cli(m, "events", "tail", "--client", str(me), "--count", "1", "--json")
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout.splitlines()[0])
    assert first["type"] == "granted" and first["allocation"] == alloc
    r = cli(m, "events", "tail", "--client", str(me), "--no-follow")
    assert r.returncode == 0 and "granted" in r.stdout

    r = cli(m, "token", "create", "--consumer", "/Apps/web", "-o", str(tmp_path / "web.token"))
    assert r.returncode == 0 and (tmp_path / "web.token").stat().st_mode & 0o777 == 0o600
    web_token = (tmp_path / "web.token").read_text().strip()
    assert web_token not in r.stdout
    r = cli(m, "alloc", "list", "--json", token=web_token)  # a consumer token sees its own subtree
    assert [a["id"] for a in json.loads(r.stdout)["allocations"]] == [alloc]
    r = cli(m, "host", "close", "host1", token=web_token)
    assert r.returncode == 1 and "403" in r.stderr
    r = cli(m, "token", "create", "--admin", "--agent", "host1")
    assert r.returncode == 2 and "exactly one" in r.stderr

    r = cli(m, "host", "close", "host1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "closed"
    r = cli(m, "host", "list", "--json")
    assert [h["state"] for h in json.loads(r.stdout)["hosts"]] == ["closed"]
    assert cli(m, "host", "open", "host1").returncode == 0

    r = cli(m, "consumer", "view", "/Apps/web", "--json")
    assert r.returncode == 0
    view = json.loads(r.stdout)
    assert view["groups"][0]["held"] == 2 and [a["id"] for a in view["allocations"]] == [alloc]
    assert "SHORTFALL" in cli(m, "consumer", "list").stdout

    wait_until(lambda: json.loads(cli(m, "activity", "list", "--alloc", str(alloc), "--json").stdout)
               ["activities"][0]["state"] == "running", 20, "the activity running")
    r = cli(m, "activity", "kill", str(act["id"]))
    assert r.returncode == 0, r.stderr
    wait_until(lambda: json.loads(cli(m, "activity", "view", str(act["id"]), "--json").stdout)
               ["activity"]["state"] == "killed", 20, "the activity killed")

    r = cli(m, "alloc", "free", str(alloc), "--host", "host1", "--blocked")
    assert r.returncode == 0, r.stderr
    view = json.loads(cli(m, "alloc", "view", str(alloc), "--json").stdout)
    assert view["blocked"] == ["host1"]
    assert "allocation " + str(alloc) in cli(m, "alloc", "view", str(alloc)).stdout
    r = cli(m, "alloc", "free", str(alloc))
    assert r.returncode == 0 and "freed" in r.stdout
    assert cli(m, "alloc", "view", str(alloc)).returncode == 1


def test_keep_workers_gives_a_reclaimed_host_back_before_the_deadline(cluster, tmp_path):
    m = cluster
    kw = Proc([sys.executable, str(ROOT / "examples" / "service" / "keep_workers.py"), "--master", m.url,
               "--consumer", "/Apps/batch", "--slots", "4"], tmp_path / "keep_workers.log")
    kw.start(env={"APPORTION_TOKEN": m.token})
    try:
        with Client(m.url, token=m.token) as api:
            def batch_alloc():
                got = [a for a in api.allocations(consumer="/Apps/batch")]
                return got[0] if got else None

            def running(alloc_id):
                return [a for a in api.activities(alloc_id) if a["state"] == "running"]

            # /Ops owns 2 of host1's 4 slots and never lends: batch gets the other 2, one worker each
            a = wait_until(lambda: (x := batch_alloc()) and x["held"] == 2 and x, 20, "batch granted 2")
            wait_until(lambda: len(running(a["id"])) == 2, 20, f"two workers:\n{kw.output()}")

            web = api.register("web", "/Apps/web")
            web_alloc = api.allocate("/Apps/web", "Workers", 0, 2, client=web)
            with api.events(a["client"]) as batch_events, api.events(web) as web_events:
                reclaim = batch_events.next(20)
                while reclaim["type"] != "reclaim":
                    reclaim = batch_events.next(20)
                granted = web_events.next(20)
                while granted["type"] != "granted":
                    granted = web_events.next(20)
            # keep_workers gave the host back itself: web had its slot before batch's 5 s grace ran out
            assert granted["allocation"] == web_alloc["id"] and granted["at"] < reclaim["deadline"]
            # it gave back just the slot reclaimed; its other worker ran on
            wait_until(lambda: "released 1 slot(s) on host1" in kw.output(), 10, "keep_workers to say so")
            wait_until(lambda: (x := api.allocation(a["id"]))["held"] >= 1 and not x["reclaiming"]
                       and len(running(a["id"])) == x["held"], 20, f"batch's workers again:\n{kw.output()}")
            assert not [e for e in api.poll_events(a["client"], after=0, wait=0) if e["type"] == "removed"]

            # host1's agent dies: the host goes down, batch's slots are lost and its workers forgotten;
            # when the agent is back, batch is granted again and starts new workers
            m.agent.kill()
            wait_until(lambda: "lost:" in kw.output(), 20, f"keep_workers to hear of the loss:\n{kw.output()}")
            before = {x["id"] for x in api.activities(a["id"])}
            m.agent.start(env={"APPORTION_TOKEN": m.token})
            wait_until(lambda: (x := api.allocation(a["id"]))["held"] >= 1
                       and len([w for w in running(a["id"]) if w["id"] not in before]) == x["held"], 20,
                       f"new workers after the host came back:\n{kw.output()}")

            kw.kill(signal.SIGTERM)  # it ends its allocation on the way out
            assert kw.popen.wait(20) == 0, kw.output()
            assert api.allocations(consumer="/Apps/batch") == []
    finally:
        kw.kill()


def test_keep_workers_restarts_a_failing_worker_no_faster_than_once_a_second(cluster, tmp_path):
    m = cluster
    kw = Proc([sys.executable, str(ROOT / "examples" / "service" / "keep_workers.py"), "--master", m.url,
               "--consumer", "/Apps/web", "--slots", "1", "--worker", f"{sys.executable} -c 'raise SystemExit(3)'"],
              tmp_path / "keep_workers.log")
    kw.start(env={"APPORTION_TOKEN": m.token})
    try:
        with Client(m.url, token=m.token) as api:
            def failed():
                allocs = api.allocations(consumer="/Apps/web")
                return allocs and [a for a in api.activities(allocs[0]["id"]) if a["exit_code"] == 3]

            first = wait_until(lambda: len(failed() or []) >= 1 and failed(), 20, f"a worker failed:\n{kw.output()}")
            started = min(a["created_at"] for a in first)
            again = wait_until(lambda: len(failed() or []) >= 2 and failed(), 20, f"restarted:\n{kw.output()}")
            # each restart waited its second after the failure before it
            span = max(a["created_at"] for a in again) - started
            assert span >= 0.9 * (len(again) - 1), [(a["id"], a["created_at"]) for a in again]
    finally:
        kw.kill()


def test_plan_validate_and_a_one_file_diff_ask_the_master(cluster, tmp_path):
    m = cluster
    with Client(m.url, token=m.token) as api:
        me = api.register("diff-test", "/Apps/batch")
        alloc = api.allocate("/Apps/batch", "Workers", 0, 2, client=me)
        wait_until(lambda: api.allocation(alloc["id"])["held"] == 2, 20, "batch granted 2")
    smaller = tmp_path / "smaller.yaml"  # /Apps/batch is no longer a consumer: its allocation would go
    smaller.write_text("resource_groups:\n  - {name: Workers, select: select(slots > 0)}\n"
                       "consumers:\n  - {path: /Ops, owned: 2}\n  - {path: /Apps}\n  - {path: /Apps/web}\n")
    r = cli(m, "plan", "validate", str(smaller))
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    r = cli(m, "plan", "diff", str(smaller), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["removed"]
    r = cli(m, "plan", "diff", str(smaller))
    assert r.returncode == 0 and "remove at once" in r.stdout, r.stderr
    assert json.loads(cli(m, "plan", "show", "--json").stdout)["version"] == 1  # nothing was applied
