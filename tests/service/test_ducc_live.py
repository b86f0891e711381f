"""DUCC on the live master, end to end: a real master on a DUCC plan, real agents, real
worker processes that fetch and report their work items through the SDK's work loop.

Quantum 1 GB throughout, so a machine of M GB has order M and a process of P GB order P.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import create_engine, text

from tests.service.live import Master, events, reap, start_agent, start_master, wait_until

PLAN = ("ducc:\n  properties: {ducc.rm.share.quantum: 1, ducc.rm.node.stability: 4, ducc.rm.prediction: false}\n"
        "  accounts: {'*': nobody}\n")  # the test's DUCC users (ann, ...) have no OS accounts here


def worker(seconds: float) -> list[str]:
    """A job's process: each item is a sleep of ``seconds``, as many at once as the job's threads."""
    return [sys.executable, "-c",
            f"import time\nfrom apportion.client import serve\nserve(lambda item: time.sleep({seconds}))"]


SERVICE = [sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"]


def ducc_master(tmp: Path, hosts: dict[str, float], db: str | None = None) -> tuple[Master, dict[str, Any]]:
    m = start_master(tmp, PLAN, db=db, extra=["--tick", "0.5", "--kill-grace", "5"])
    agents = {name: start_agent(m, name, tmp / name, extra=["--memory", str(gb)]) for name, gb in hosts.items()}
    with m.http() as c:
        wait_until(lambda: {h["name"] for h in c.get("/v1/hosts").json()["hosts"] if h["state"] == "ok"}
                   == set(hosts), 30, f"agents {sorted(hosts)} registered")
    return m, agents


def stop(m: Master, agents: dict[str, Any]) -> None:
    for a in agents.values():
        a.kill(signal.SIGTERM)
    m.proc.kill()
    reap()


def job(c: httpx.Client, jid: int) -> dict[str, Any]:
    return c.get(f"/v1/jobs/{jid}").json()


def ended(c: httpx.Client, jid: int, timeout: float = 90) -> dict[str, Any]:
    return wait_until(lambda: (j := job(c, jid))["state"] in ("done", "failed", "cancelled") and j, timeout,
                      f"job {jid} ended")


def store_items(m: Master, jid: int) -> list[tuple[int, str, int | None]]:
    eng = create_engine(m.db)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.execute(
                text("SELECT idx, state, share FROM job_items WHERE job = :j ORDER BY idx"), {"j": jid})]
    finally:
        eng.dispose()


def all_done_once(m: Master, c: httpx.Client, jid: int, total: int) -> None:
    j = job(c, jid)
    assert j["state"] == "done", j
    assert j["items"] == {"total": total, "done": total, "failed": 0, "in_flight": 0}, j
    rows = store_items(m, jid)
    assert [r[0] for r in rows] == list(range(total))
    assert all(state == "done" and share is not None for _, state, share in rows), rows[:5]


def test_second_user_evicts_by_least_investment_and_every_item_is_done_once(tmp_path: Path) -> None:
    m, agents = ducc_master(tmp_path, {f"h{i}": 4 for i in range(4)})
    try:
        with m.http() as c:
            a = c.post("/v1/jobs", json={"user": "ann", "memory": 2, "threads": 1, "work": list(range(200)),
                                         "argv": worker(0.25)}).json()["id"]
            # ann grows by doubling to the whole cluster: 4 machines x 2 processes of order 2
            wait_until(lambda: sum(job(c, a)["processes"].values()) == 8, 60, "ann's job on 8 processes")
            wait_until(lambda: job(c, a)["items"]["done"] >= 20, 30, "ann's processes working")
            b = c.post("/v1/jobs", json={"user": "bob", "memory": 2, "threads": 1, "work": list(range(200)),
                                         "argv": worker(0.05)}).json()["id"]
            ann_client = job(c, a)
            client = next(x["id"] for x in [c.get(f"/v1/clients/{i}").json() for i in range(1, 4)]
                          if x.get("name") == "user:ann")
            wait_until(lambda: any(e["type"] == "evicted" for e in events(c, client)), 30, "ann's processes evicted")
            wait_until(lambda: sum(job(c, b)["processes"].values()) >= 1, 30, "bob's job placed")
            ja, jb = ended(c, a, 120), ended(c, b, 120)
            assert ja["state"] == jb["state"] == "done", (ja, jb, ann_client)
            evicted = [e for e in events(c, client) if e["type"] == "evicted"]
            assert evicted and all(e["reason"] == "over-count" for e in evicted), evicted
            for e in evicted:  # least investment first: initialising ones, then the fewest items done
                if e["initialized"]:
                    assert e["kept_initializing"] == 0, e
                    assert e["kept_least"] is None or e["investment"] <= e["kept_least"], e
            all_done_once(m, c, a, 200)
            all_done_once(m, c, b, 200)
            # a done job's processes learn it from their next request and exit by themselves
            bobs = wait_until(lambda: (x := [act for act in c.get("/v1/activities").json()["activities"]
                                             if act.get("job") == b]) and all(act["state"] == "exited" for act in x)
                              and x, 30, "bob's processes ended")
            assert all(act["exit_code"] == 0 and not act["stop_reason"] for act in bobs), bobs
    finally:
        stop(m, agents)


def test_reservation_of_an_exact_machine_and_the_deferral_when_none_is_free(tmp_path: Path) -> None:
    m, agents = ducc_master(tmp_path, {"small": 4, "big": 8})
    try:
        with m.http() as c:
            r = c.post("/v1/reservations", json={"class": "reserve", "memory": 8})
            assert r.status_code == 201, r.text
            first = r.json()
            got = wait_until(lambda: (x := c.get(f"/v1/reservations/{first['id']}").json())["host"] and x, 20,
                             "the reservation placed")
            assert got["host"] == "big" and got["state"] == "running", got
            second = c.post("/v1/reservations", json={"class": "reserve", "memory": 8}).json()
            wait_until(lambda: c.get(f"/v1/reservations/{second['id']}").json()["reason"], 20, "a reason to wait")
            waiting = c.get(f"/v1/reservations/{second['id']}").json()
            assert waiting["state"] == "waiting" and waiting["host"] is None, waiting
            occ = {x["name"]: x for x in c.get("/v1/occupancy").json()["machines"]}
            assert occ["big"]["free"] == 0 and occ["big"]["shares"][0]["job"] == first["id"], occ
            assert occ["small"]["free"] == 4, occ
            # giving the first back lets the second have the machine
            assert c.delete(f"/v1/reservations/{first['id']}").json()["state"] == "cancelled"
            moved = wait_until(lambda: (x := c.get(f"/v1/reservations/{second['id']}").json())["host"] and x, 20,
                               "the waiting reservation placed")
            assert moved["host"] == "big"
    finally:
        stop(m, agents)


def test_vary_off_evicts_only_fair_share_work(tmp_path: Path) -> None:
    m, agents = ducc_master(tmp_path, {"h0": 4, "h1": 4})
    try:
        with m.http() as c:
            svc = c.post("/v1/services", json={"class": "fixed", "memory": 2, "argv": SERVICE}).json()
            on = wait_until(lambda: (x := c.get(f"/v1/services/{svc['id']}").json())["host"] and x, 20,
                            "the service placed")["host"]
            jid = c.post("/v1/jobs", json={"memory": 1, "threads": 1, "work": list(range(400)),
                                           "argv": worker(0.2)}).json()["id"]
            wait_until(lambda: job(c, jid)["processes"].get(on, 0) >= 1, 60, f"the job on {on}")
            assert c.post(f"/v1/hosts/{on}/vary-off").status_code == 200
            wait_until(lambda: job(c, jid)["processes"].get(on, 0) == 0, 30, f"the job's processes off {on}")
            occ = {x["name"]: x for x in c.get("/v1/occupancy").json()["machines"]}
            assert [s["job"] for s in occ[on]["shares"]] == [svc["id"]], occ[on]
            s = c.get(f"/v1/services/{svc['id']}").json()
            assert s["state"] == "running" and s["host"] == on, s
            acts = [x for x in c.get("/v1/activities").json()["activities"] if x.get("job") == svc["id"]]
            assert len(acts) == 1 and acts[0]["state"] == "running", acts  # never stopped
            assert c.post(f"/v1/hosts/{on}/vary-on").status_code == 200
            c.delete(f"/v1/jobs/{jid}")
    finally:
        stop(m, agents)


def test_a_killed_agent_s_items_are_finished_elsewhere(tmp_path: Path) -> None:
    m, agents = ducc_master(tmp_path, {"h0": 4, "h1": 4})
    try:
        with m.http() as c:
            jid = c.post("/v1/jobs", json={"memory": 2, "threads": 2, "work": list(range(120)),
                                           "argv": worker(0.2)}).json()["id"]
            wait_until(lambda: job(c, jid)["processes"].get("h1", 0) >= 1 and job(c, jid)["items"]["in_flight"] > 0,
                       60, "the job working on h1")
            # the host dies: its agent and every process it started
            victim = agents["h1"].popen.pid
            kids = psutil.Process(victim).children(recursive=True)
            for p in psutil.process_iter(["pid"]):
                try:
                    if p.environ().get("APPORTION_HOST") == "h1":
                        kids.append(p)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    pass
            agents["h1"].kill()
            for k in kids:
                try:
                    k.kill()
                except psutil.NoSuchProcess:
                    pass
            wait_until(lambda: any(h["name"] == "h1" and h["state"] == "down"
                                   for h in c.get("/v1/hosts").json()["hosts"]), 30, "h1 dead")
            end = ended(c, jid, 120)
            assert end["state"] == "done", end
            all_done_once(m, c, jid, 120)
            lost = [a for a in c.get("/v1/activities").json()["activities"] if a["host"] == "h1" and a.get("job")]
            assert lost and all(a["state"] == "lost" for a in lost), lost
    finally:
        stop(m, agents)


def test_a_service_is_started_again_when_it_exits_and_stops_when_told(tmp_path: Path) -> None:
    m, agents = ducc_master(tmp_path, {"h0": 4})
    try:
        with m.http() as c:
            once = [sys.executable, "-c", "import time; time.sleep(0.3)"]
            svc = c.post("/v1/services", json={"class": "fixed", "memory": 1, "argv": once}).json()
            runs = lambda: [a for a in c.get("/v1/activities").json()["activities"] if a.get("job") == svc["id"]]  # noqa: E731
            wait_until(lambda: len(runs()) >= 3, 30, "the service started three times")
            assert all(a["state"] == "exited" and a["exit_code"] == 0 for a in runs()[:2]), runs()
            assert c.delete(f"/v1/services/{svc['id']}").json()["state"] == "cancelled"
            wait_until(lambda: all(a["state"] not in ("starting", "running") for a in runs()), 30, "stopped")
            occ = c.get("/v1/occupancy").json()["machines"][0]
            wait_until(lambda: c.get("/v1/occupancy").json()["machines"][0]["free"] == 4, 20, "its share freed")
            assert occ["name"] == "h0"
    finally:
        stop(m, agents)


def test_bad_input_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    m, agents = ducc_master(tmp_path, {"h0": 4})
    try:
        with m.http() as c:
            jid = c.post("/v1/jobs", json={"memory": 1, "threads": 2, "max_processes": 1, "work": list(range(10)),
                                           "argv": SERVICE}).json()["id"]  # a process that never asks for work
            share = wait_until(lambda: next(iter(c.get("/v1/occupancy").json()["machines"][0]["shares"]), None),
                               20, "the job placed")["share"]
            before = (c.get("/v1/jobs").json(), c.get("/v1/reservations").json(), store_items(m, jid))
            cases = [
                ("POST", "/v1/jobs", {"class": "nope", "memory": 1, "work": [1], "argv": ["x"]}, 422, "class"),
                ("POST", "/v1/jobs", {"memory": 64, "work": [1], "argv": ["x"]}, 422, "memory"),
                ("POST", "/v1/jobs", {"class": "reserve", "memory": 1, "work": [1], "argv": ["x"]}, 422, "class"),
                ("POST", "/v1/jobs", {"memory": 1, "work": [], "argv": ["x"]}, 422, "work"),
                ("POST", "/v1/jobs", {"memory": -1, "work": [1], "argv": ["x"]}, 422, "memory"),
                ("POST", "/v1/reservations", {"class": "normal", "memory": 1}, 422, "class"),
                ("POST", "/v1/reservations", {"class": "reserve", "memory": 65}, 422, "memory"),
                ("POST", "/v1/services", {"class": "normal", "memory": 1, "argv": ["x"]}, 422, "class"),
                ("POST", f"/v1/jobs/{jid}/work", {"process": share, "done": [3]}, 422, "done"),
                ("POST", f"/v1/jobs/{jid}/work", {"process": share, "failed": [{"item": 4}]}, 422, "failed"),
                ("POST", f"/v1/jobs/{jid}/work", {"process": share + 100, "done": []}, 404, None),
                ("POST", f"/v1/jobs/{jid}/work", {"process": share, "done": [], "bogus": 1}, 422, "bogus"),
                ("POST", "/v1/jobs/999/work", {"process": share}, 404, None),
                ("GET", "/v1/jobs/999", None, 404, None),
            ]
            for method, path, body, status, field in cases:
                r = c.request(method, path, json=body)
                assert r.status_code == status, (method, path, body, r.text)
                if field is not None:
                    locs = [d["loc"] for d in r.json()["detail"]]
                    assert any(field in loc for loc in locs), (path, body, r.text)
            # a process token of another job, and a user's token acting as someone else
            ann = c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/ann"}).json()["token"]
            with m.http(ann) as as_ann:
                r = as_ann.post("/v1/jobs", json={"user": "bob", "memory": 1, "work": [1], "argv": ["x"]})
                assert r.status_code == 403, r.text
                assert as_ann.get(f"/v1/jobs/{jid}").status_code == 403  # admin's job: not ann's to see
                assert as_ann.post(f"/v1/jobs/{jid}/work", json={"process": share}).status_code == 403
            after = (c.get("/v1/jobs").json(), c.get("/v1/reservations").json(), store_items(m, jid))
            assert after == before
            # the right report is taken: items given, then reported done
            got = c.post(f"/v1/jobs/{jid}/work", json={"process": share}).json()
            assert len(got["items"]) == 2 and got["more"]
            done = c.post(f"/v1/jobs/{jid}/work", json={"process": share, "done": [got["items"][0]["id"]],
                                                          "want": 0}).json()
            assert done["holding"] == [got["items"][1]["id"]]
            assert job(c, jid)["items"] == {"total": 10, "done": 1, "failed": 0, "in_flight": 1}
    finally:
        stop(m, agents)


def test_an_ego_master_refuses_jobs_and_a_ducc_master_refuses_allocations(tmp_path: Path) -> None:
    m, agents = ducc_master(tmp_path, {"h0": 4})
    try:
        with m.http() as c:
            cid = c.post("/v1/clients", json={"name": "x", "consumer": "/ann"}).json()["id"]
            r = c.post("/v1/allocations", json={"client": cid, "consumer": "/ann", "max": 1})
            assert r.status_code == 409 and "DUCC" in r.text, r.text
            ego = "hosts: []\nresource_groups: [{name: RG, select: select(slots > 0)}]\nconsumers: [{path: /A}]\n"
            r = c.put("/v1/plan", content=ego)
            assert r.status_code == 422, r.text
    finally:
        stop(m, agents)
    e = start_master(tmp_path / "ego", "hosts: []\nresource_groups: [{name: RG, select: select(slots > 0)}]\n"
                                       "consumers: [{path: /A}]\n")
    try:
        with e.http() as c:
            r = c.post("/v1/jobs", json={"memory": 1, "work": [1], "argv": ["x"]})
            assert r.status_code == 409 and "EGO" in r.text, r.text
            r = c.put("/v1/plan", content=PLAN)
            assert r.status_code == 422 and "one kind of plan" in r.text, r.text
    finally:
        e.proc.kill()


def test_work_survives_a_master_restart(tmp_path: Path, db_url: str) -> None:
    m, agents = ducc_master(tmp_path, {"h0": 4, "h1": 4}, db_url)
    try:
        with m.http() as c:
            jid = c.post("/v1/jobs", json={"memory": 1, "threads": 2, "work": list(range(150)),
                                           "argv": worker(0.1)}).json()["id"]
            wait_until(lambda: job(c, jid)["items"]["done"] >= 30, 60, "the job half way")
        m.restart()
        with m.http() as c:
            end = ended(c, jid, 120)
            assert end["state"] == "done", (end["reason"], end["items"])
            all_done_once(m, c, jid, 150)
    finally:
        stop(m, agents)



CLASSES = """
Nodepool left  {{ nodefile = left.nodes }}
Nodepool right {{ nodefile = right.nodes }}
Class normal  {{ policy = FAIR_SHARE;  nodepool = {pool}; default = true }}
Class fixed   {{ policy = FIXED_SHARE; nodepool = left;   default = true }}
Class reserve {{ policy = RESERVE;     nodepool = left;   default = true }}
"""


def test_reconfigure_under_running_work_blacklists_what_no_longer_belongs(tmp_path: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "left.nodes").write_text("h0\n")
    (tmp_path / "right.nodes").write_text("h1\n")
    classes = tmp_path / "ducc.classes"
    classes.write_text(CLASSES.format(pool="left"))
    plan = ("ducc:\n  classes: ducc.classes\n  properties: {ducc.rm.share.quantum: 1, ducc.rm.prediction: false}\n"
            "  accounts: {'*': nobody}\n")
    m = start_master(tmp_path, plan, extra=["--tick", "0.5"])
    agents = {h: start_agent(m, h, tmp_path / h, extra=["--memory", "4"]) for h in ("h0", "h1")}
    try:
        with m.http() as c:
            wait_until(lambda: len(c.get("/v1/hosts").json()["hosts"]) == 2, 30, "two agents")
            jid = c.post("/v1/jobs", json={"memory": 1, "threads": 1, "work": list(range(300)),
                                           "argv": worker(0.2)}).json()["id"]
            wait_until(lambda: job(c, jid)["processes"].get("h0", 0) >= 2, 60, "the job on h0, its nodepool")
            assert "h1" not in job(c, jid)["processes"]
            classes.write_text(CLASSES.format(pool="right"))
            version = c.post("/v1/reconfigure").json()["version"]
            assert version == 2
            wait_until(lambda: (p := job(c, jid)["processes"]).get("h1", 0) >= 1 and "h0" not in p, 60,
                       "the job moved to h1, its new nodepool")
            evicted = [e for e in events(c, job(c, jid)["client"]) if e["type"] == "evicted"]
            assert {e["host"] for e in evicted if e["reason"] == "blacklist"} == {"h0"}, evicted
            # a configuration that does not read is refused and the one in force stays
            classes.write_text("Class broken {")
            r = c.post("/v1/reconfigure")
            assert r.status_code == 422 and "ducc.classes" in r.text, r.text
            assert c.get("/v1/plan").json()["version"] == 2
            c.delete(f"/v1/jobs/{jid}")
    finally:
        stop(m, agents)


FAILS_ON_3 = [sys.executable, "-c", """
import sys
from apportion.client import work
items = work()
for n in items:
    if n == 3:
        items.fail("three is bad")
    elif n == 5:
        sys.exit(7)   # this process dies on item 5, each time
"""]


def test_failed_items_are_tried_again_then_reported_and_the_cli_shows_them(tmp_path: Path) -> None:
    m, agents = ducc_master(tmp_path, {"h0": 4})
    env = {**os.environ, "APPORTION_MASTER": m.url, "APPORTION_TOKEN": m.token}
    cli = [sys.executable, "-m", "apportion.cli"]
    try:
        r = subprocess.run([*cli, "job", "submit", "--memory", "1", "--threads", "1", "--retries", "2", "--user",
                            "ann", "--wait", "--json", *[f"--work={i}" for i in range(10)], "--", *FAILS_ON_3],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr  # it ended, and not done
        end = json.loads(r.stdout)
        assert end["state"] == "failed" and end["items"]["done"] == 8 and end["items"]["failed"] == 2, end
        failed = {f["item"]: f for f in end["failed_items"]}
        assert set(failed) == {3, 5} and all(f["attempts"] == 3 for f in failed.values()), failed
        assert failed[3]["error"] == "three is bad" and "exit code 7" in failed[5]["error"], failed
        listed = subprocess.run([*cli, "job", "list", "--user", "ann"], env=env, capture_output=True, text=True)
        assert listed.returncode == 0 and "failed" in listed.stdout, listed.stdout
        occ = json.loads(subprocess.run([*cli, "occupancy", "--json"], env=env, capture_output=True,
                                        text=True).stdout)
        assert occ["machines"][0]["order"] == 4
        r = subprocess.run([*cli, "job", "submit", "--memory", "1", "--class", "nope", "--work", "1", "--", "true"],
                           env=env, capture_output=True, text=True)
        assert r.returncode == 1 and "nope is not a class" in r.stderr, r.stderr
        off = subprocess.run([*cli, "host", "vary-off", "h0"], env=env, capture_output=True, text=True)
        assert off.returncode == 0 and "varied off" in off.stdout
        assert [o["state"] for o in json.loads(subprocess.run([*cli, "occupancy", "--json"], env=env,
                                                              capture_output=True, text=True).stdout)["machines"]]\
            == ["varied_off"]
    finally:
        stop(m, agents)


def test_a_process_started_just_before_a_restart_keeps_its_token(tmp_path: Path) -> None:
    """The agent started a job's process with the token of its start command, and the master
    was killed before it heard that the process runs: the restarted master mints a token for
    a start it may have to send again, and the token the process already has still works."""
    m = start_master(tmp_path, PLAN, extra=["--tick", "0.5"])
    try:
        with m.http() as c:
            # this test is h0's agent: it registers and takes the start without running it
            assert c.post("/v1/agents/h0/register", json={"slots": 4, "memory": 4, "os": "Linux", "attributes": {},
                                                          "activities": []}).status_code == 200
            jid = c.post("/v1/jobs", json={"memory": 1, "threads": 1, "work": list(range(5)),
                                           "argv": worker(0.1)}).json()["id"]

            def start() -> dict | None:
                got = c.post("/v1/agents/h0/heartbeat", json={"wait": 0.2, "activities": []}).json()
                return next((x for x in got.get("commands") or [] if x.get("op") == "start"), None)

            cmd = wait_until(start, 30, "a start command for the job's process")
            token, share = cmd["env"]["APPORTION_TOKEN"], int(cmd["env"]["APPORTION_PROCESS"])
        m.restart()
        with httpx.Client(base_url=m.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as p:
            got = p.post(f"/v1/jobs/{jid}/work", json={"process": share})
            assert got.status_code == 200, got.text
            assert got.json()["items"], got.json()
    finally:
        m.proc.kill()
        reap()
