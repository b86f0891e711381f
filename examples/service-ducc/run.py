"""DUCC on the live service, on SQLite: a master, three agents, a job of 1,000 work items.

Run it with `.venv/bin/python examples/service-ducc/run.py`. In a temporary directory,
on a free port of 127.0.0.1, it runs what a user would:

1. `apportion server init` and `apportion server --plan examples/service-ducc/plan.yaml`;
2. three agents: `apportion agent --name node1 --memory 8` (and node2, node3), real processes;
3. `apportion job submit --memory 2 --threads 2 --work-file items.json -- $VENV/bin/python $PWD/worker.py`
   (the interpreter by its full path: the agents look a bare name up on their own `--path`):
   1,000 items (ranges of integers whose primes the processes count); the job starts with
   one process, doubles once it has initialised, and spreads over the three machines;
4. halfway, a second user's job arrives: DUCC's fair share evicts some of the first job's
   processes (least investment first) and their items in flight go back to the queue;
5. both jobs end with every item done exactly once: `apportion job view`, `apportion occupancy`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from apportion.client import Client

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "apportion.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(check, what: str, timeout: float = 120.0):  # noqa: ANN001, ANN201
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise SystemExit(f"example: gave up waiting for {what}")


def show(cmd: list[str], env: dict[str, str]) -> None:
    print(f"\n$ apportion {' '.join(cmd)}", flush=True)
    subprocess.run([*CLI, *cmd], env=env, check=False)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="apportion-ducc-"))
    work.chmod(0o711)  # the jobs' users pass through to their activity directories (a root agent checks)
    db = f"sqlite:///{work / 'apportion.db'}"
    url = f"http://127.0.0.1:{free_port()}"
    token_file = work / "admin.token"
    subprocess.run([*CLI, "server", "init", "--db", db, "--token-file", str(token_file)], check=True)
    env = {**os.environ, "APPORTION_MASTER": url, "APPORTION_TOKEN": token_file.read_text().strip()}
    items = work / "items.json"
    items.write_text(json.dumps([{"from": 10**6 + i * 10_000, "to": 10**6 + (i + 1) * 10_000} for i in range(1000)]))
    procs: list[subprocess.Popen] = []
    log = open(work / "processes.log", "wb")  # noqa: SIM115 - the children keep it
    try:
        procs.append(subprocess.Popen([*CLI, "server", "--plan", str(HERE / "plan.yaml"), "--db", db,
                                       "--listen", url.removeprefix("http://"), "--tick", "0.5",
                                       "--kill-grace", "2"],
                                      stdout=log, stderr=log, env=env, start_new_session=True))
        for n in (1, 2, 3):
            procs.append(subprocess.Popen([*CLI, "agent", "--master", url, "--name", f"node{n}", "--memory", "8",
                                           "--workdir", str(work / f"node{n}")],
                                          stdout=log, stderr=log, env=env, start_new_session=True))
        with Client(url, token=env["APPORTION_TOKEN"]) as api:
            until(lambda: len([h for h in api.hosts() if h["state"] == "ok"]) == 3, "three agents")
            print(f"master {url} on {db}; node1..3 reported 8 GB each (8 quanta of 1 GB)", flush=True)
            first = subprocess.run([*CLI, "job", "submit", "--memory", "2", "--threads", "2", "--user", "ann",
                                    "--work-file", str(items), "--json", "--", sys.executable,
                                    str(HERE / "worker.py")], env=env, check=True, capture_output=True, text=True)
            a = json.loads(first.stdout)["id"]
            print(f"ann's job {a}: 1,000 items, 2 GB processes, 2 threads each", flush=True)
            until(lambda: api.job(a)["items"]["done"] >= 300, "ann's job a third done")
            show(["occupancy"], env)
            b = api.submit_job([{"from": 10**6 + i * 10_000, "to": 10**6 + (i + 1) * 10_000} for i in range(300)],
                               [sys.executable, str(HERE / "worker.py")], memory=2, threads=2, user="bob")["id"]
            print(f"\nbob's job {b} arrives: fair share takes processes from ann's job", flush=True)
            for jid in (a, b):
                until(lambda jid=jid: api.job(jid)["state"] in ("done", "failed", "cancelled"), f"job {jid} to end",
                      timeout=600)
            show(["job", "view", str(a)], env)
            show(["job", "view", str(b)], env)
            evicted = [e for e in api.poll_events(api.job(a)["client"], after=0) if e["type"] == "evicted"]
            print(f"\nann's processes evicted for bob: {len(evicted)} "
                  f"({', '.join(str(e['investment']) for e in evicted)} items done by each when evicted)")
            show(["occupancy"], env)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        print(f"\n(stopped; the store and the logs are in {work})")



if __name__ == "__main__":
    main()
