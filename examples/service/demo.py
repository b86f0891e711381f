"""The live service in a minute, on SQLite: a master, one agent, two tenants and a reclaim.

Run it with `make demo` (or `.venv/bin/python examples/service/demo.py`). It starts, in a
temporary directory and on a free port of 127.0.0.1:

1. `apportion server init` and `apportion server --plan examples/service/plan.yaml`;
2. `apportion agent --name host1 --slots 6`, which runs real processes (/Ops owns 2 of the 6
   slots and never lends them: the tenants of /Apps share the other 4);
3. /Apps/batch asks for 4 slots, gets all 4 and starts 4 workers there;
4. /Apps/web (share ratio 2 against batch's 1) asks for 4: a `reclaim` reaches batch with
   batch's 5 s grace period. Batch ignores it, so at the deadline the agent stops its newest
   workers (SIGTERM, then SIGKILL after the kill grace) and web is granted the slots.

Then it shows `apportion rg Workers` and the events each tenant received, and stops everything:
the allocations are deleted (so the agent stops every worker, and says so) before the agent and
the master stop, and nothing the demo started is left running.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from apportion.client import Client

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "apportion.cli"]
# A worker any execution user can run (run as root, the agent starts it as `nobody`).
WORKER = ["sleep", "3600"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(check, what: str, timeout: float = 30.0):  # noqa: ANN001, ANN201
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise SystemExit(f"demo: gave up waiting for {what}")


def show(title: str, cmd: list[str], env: dict[str, str]) -> None:
    print(f"\n$ apportion {' '.join(cmd)}    # {title}", flush=True)
    subprocess.run([*CLI, *cmd], env=env, check=False)


def stop_workers(api: Client, allocations: list[int]) -> None:
    """Delete the allocations: the master has the agent stop their workers. Wait until none runs."""
    for a in allocations:
        api.delete(a)
    until(lambda: not [w for a in allocations for w in api.activities(a) if w["state"] == "running"],
          "the workers to stop")


def left_behind(url: str) -> list[psutil.Process]:
    """Processes of this demo's activities still running (the agent tells each its master's URL)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("APPORTION_MASTER") == url and p.pid != os.getpid():
                out.append(p)
        except psutil.Error:
            continue
    return out


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="apportion-demo-"))
    # an agent run as root starts its workers as other users, who must be able to pass through
    # to their activity directories under the agent's --workdir (the agent checks at start)
    work.chmod(0o711)
    db = f"sqlite:///{work / 'apportion.db'}"
    url = f"http://127.0.0.1:{free_port()}"
    token_file = work / "admin.token"
    subprocess.run([*CLI, "server", "init", "--db", db, "--token-file", str(token_file)], check=True)
    env = {**os.environ, "APPORTION_MASTER": url, "APPORTION_TOKEN": token_file.read_text().strip()}
    procs: list[subprocess.Popen] = []
    allocations: list[int] = []
    stopped = False
    log = open(work / "processes.log", "wb")  # noqa: SIM115 - the children keep it
    try:
        procs.append(subprocess.Popen([*CLI, "server", "--plan", str(HERE / "plan.yaml"), "--db", db,
                                       "--listen", url.removeprefix("http://"), "--kill-grace", "2"],
                                      stdout=log, stderr=log, env=env, start_new_session=True))
        procs.append(subprocess.Popen([*CLI, "agent", "--master", url, "--name", "host1", "--slots", "6",
                                       "--workdir", str(work / "host1")],
                                      stdout=log, stderr=log, env=env, start_new_session=True))
        with Client(url, token=env["APPORTION_TOKEN"]) as api:
            until(lambda: [h for h in api.hosts() if h["state"] == "ok"], "host1 to report")
            print(f"master {url} on {db}; host1 reported with 6 slots (2 of them /Ops owns and never lends)", flush=True)

            batch = api.register("demo-batch", "/Apps/batch")
            a = api.allocate("/Apps/batch", "Workers", 0, 4, client=batch)
            allocations.append(a["id"])
            until(lambda: api.allocation(a["id"])["held"] == 4, "batch's grant")
            workers = [api.start_activity(a["id"], "host1", WORKER)["id"] for _ in range(4)]
            until(lambda: all(api.activity(w)["state"] == "running" for w in workers), "batch's workers")
            print("/Apps/batch holds 4 slots on host1 and runs 4 workers", flush=True)
            show("batch has it all", ["rg", "Workers"], env)

            web = api.register("demo-web", "/Apps/web")
            b = api.allocate("/Apps/web", "Workers", 0, 4, client=web)
            allocations.append(b["id"])
            reclaim = until(lambda: [e for e in api.poll_events(batch, after=0, wait=1) if e["type"] == "reclaim"],
                            "the reclaim")
            r = reclaim[0]
            print(f"\nreclaim: {r['slots']} slots of batch on {r['host']} for {r['for']}, "
                  f"deadline in {r['deadline'] - time.time():.1f} s; batch ignores it", flush=True)
            until(lambda: api.allocation(b["id"])["held"] > 0, "web's grant", timeout=60)
            gone = [w for w in workers if api.activity(w)["state"] != "running"]
            print(f"at the deadline the agent stopped batch's newest workers {gone}; then web was granted "
                  f"{api.allocation(b['id'])['hosts']}", flush=True)
            show("after the reclaim: web's share is 2 of every 3 slots", ["rg", "Workers"], env)
            for name, cid in (("batch", batch), ("web", web)):
                print(f"\nevents of {name}:")
                for e in api.poll_events(cid, after=0, wait=0):
                    extra = {k: v for k, v in e.items() if k not in ("id", "type", "allocation")}
                    print(f"  {e['id']:>3} {e['type']:<18} {extra}")
            stop_workers(api, allocations)
            stopped = True
    finally:
        if not stopped and allocations and procs[0].poll() is None:
            try:  # the demo broke off: still stop what runs through the master
                with Client(url, token=env["APPORTION_TOKEN"]) as api:
                    stop_workers(api, [a for a in allocations if api.allocation(a)])
            except (Exception, SystemExit):  # noqa: BLE001 - the master may be the problem: the net below
                pass
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        left = left_behind(url)
        for p in left:
            p.kill()
        psutil.wait_procs(left, timeout=10)
        if left:
            print(f"\ndemo: {len(left)} processes were still running after the stop: killed", flush=True)
        print(f"\n(stopped; nothing left running; the store and the logs are in {work})")


if __name__ == "__main__":
    main()
