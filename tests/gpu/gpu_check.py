"""The GPU check's driver (check_on_gpu.sh runs it once the project is installed): a master
(SQLite) and a root agent (--pin-cores) on this machine, two activities - one that asks for a GPU
and a core, one that asks for neither - and what each saw, written to a report.

Each activity prints CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, `nvidia-smi -L` (or that there
is none), whether it may open each GPU device node, and, where a Python with torch is found on
this machine, how many CUDA devices torch counts, and the CPUs it may run on. Every wait is bounded; whatever was started is
stopped at the end, whatever happened.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

CLI = [sys.executable, "-m", "apportion.cli"]
PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /gpu}
  - {path: /cpu}
"""
# What an activity runs: argv[1] the device directory, argv[2] a Python with torch (or "-"), argv[3]
# how long to stay once done (holding its GPU), argv[4] nvidia-smi as the agent's PATH finds it (or "-").
PROBE = r"""
import errno, glob, os, shutil, subprocess, sys, time
dev, torch_py, hold, smi = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
print("CUDA_VISIBLE_DEVICES=" + repr(os.environ.get("CUDA_VISIBLE_DEVICES")))
print("CUDA_DEVICE_ORDER=" + repr(os.environ.get("CUDA_DEVICE_ORDER")))
smi = smi if smi != "-" else shutil.which("nvidia-smi")
if smi is None:
    print("nvidia-smi -L: nvidia-smi not found")
else:
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
        for line in (r.stdout + r.stderr).splitlines() or [""]:
            print("nvidia-smi -L: " + line)
        print("nvidia-smi exit: %d" % r.returncode)
    except subprocess.TimeoutExpired:
        print("nvidia-smi -L: timed out")
for node in sorted(glob.glob(os.path.join(dev, "nvidia[0-9]*"))) + [os.path.join(dev, "nvidiactl")]:
    try:
        os.close(os.open(node, os.O_RDWR))
        print("open %s: ok" % node)
    except OSError as e:
        print("open %s: %s" % (node, errno.errorcode.get(e.errno, e.errno)))
if torch_py != "-":
    try:
        r = subprocess.run([torch_py, "-c", "import torch; print(torch.cuda.device_count())"],
                           capture_output=True, text=True, timeout=120)
        print("torch.cuda.device_count: " + (r.stdout.strip() or r.stderr.strip().splitlines()[-1:][0]))
    except Exception as e:
        print("torch.cuda.device_count: %s" % e)
for line in open("/proc/self/status"):
    if line.startswith("Cpus_allowed_list"):
        print("Cpus_allowed_list=" + line.split()[1])
print("done", flush=True)
deadline = time.monotonic() + hold
while time.monotonic() < deadline:
    time.sleep(0.1)
"""


def _cpu_list(text: str) -> list[int]:
    """`0-2,5` -> [0, 1, 2, 5]."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(check: Any, timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            got = check()
        except httpx.HTTPError:
            got = None
        if got:
            return got
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout:g} s")


def torch_python() -> str:
    """A Python on this machine's PATH that imports torch, or "-"."""
    for name in ("python3", "python"):
        py = shutil.which(name)
        if py is None or py == sys.executable:
            continue
        try:
            r = subprocess.run([py, "-c", "import torch"], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            return py
    return "-"


def stop(p: subprocess.Popen[bytes] | None, grace: float = 15.0) -> None:
    if p is None or p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=5)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--gpus", default=None, help="--gpus for the agent (default: NVML finds them)")
    ap.add_argument("--dev-dir", default="/dev")
    args = ap.parse_args()
    work: Path = args.work
    report: list[str] = []

    def say(line: str) -> None:
        report.append(line)
        print(line, flush=True)

    db = f"sqlite:///{work / 'apportion.db'}"
    (work / "plan.yaml").write_text(PLAN)
    token_file = work / "admin.token"
    subprocess.run([*CLI, "server", "init", "--db", db, "--token-file", str(token_file)], check=True,
                   capture_output=True, timeout=60)
    token = token_file.read_text().strip()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    master = agent = None
    agent_dir = work / "agent"
    ok = True
    try:
        with open(work / "master.log", "ab") as log:
            master = subprocess.Popen([*CLI, "server", "--plan", str(work / "plan.yaml"), "--db", db, "--listen",
                                       f"127.0.0.1:{port}", "--heartbeat", "0.3", "--kill-grace", "2"],
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait(lambda: httpx.get(url + "/readyz", timeout=2).status_code == 200, 60, "the master ready")
        agent_cmd = [*CLI, "agent", "--master", url, "--name", "gpu-host", "--workdir", str(agent_dir),
                     "--heartbeat", "0.3", "--slots", "4", "--dev-dir", args.dev_dir, "--pin-cores"]
        if args.gpus:
            agent_cmd += ["--gpus", args.gpus]
        with open(work / "agent.log", "ab") as log:
            agent = subprocess.Popen(agent_cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "APPORTION_TOKEN": token})
        c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        host = wait(lambda: next((h for h in c.get("/v1/hosts").json()["hosts"] if h["state"] == "ok"), None),
                    60, "the agent registered")
        say(f"host: containment={host['containment']} run_as={json.dumps(host['run_as'])}")
        say(f"host resources: {json.dumps(host['resources'])}")
        if not host["resources"] or host["resources"]["gpus"] < 1:
            say("FAIL: the agent reports no GPU")
            return 1
        torch_py = torch_python()
        say(f"torch python: {torch_py}")
        acts: dict[str, int] = {}
        for name, consumer, res in (("with-gpu", "/gpu", {"gpus": 1, "cores": 1}), ("without-gpu", "/cpu", None)):
            client = c.post("/v1/clients", json={"name": name, "consumer": consumer}).json()["id"]
            body: dict[str, Any] = {"client": client, "consumer": consumer, "max": 1}
            if res:
                body["resources"] = res
            aid = c.post("/v1/allocations", json=body).json()["id"]
            wait(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 60, f"{name}: its slot granted")
            hold = "20" if res else "0"
            r = c.post(f"/v1/allocations/{aid}/activities",
                       json={"host": "gpu-host", "argv": [sys.executable, "-c", PROBE, args.dev_dir, torch_py, hold,
                                                          shutil.which("nvidia-smi") or "-"]})
            say(f"{name}: start -> {r.status_code} devices={json.dumps(r.json().get('devices'))}")
            acts[name] = r.json()["id"]
            if res:
                wait(lambda: "done" in c.get(f"/v1/activities/{acts[name]}/output").json()["stdout"], 180,
                     f"{name}: its output")
                # another allocation that needs a GPU: while the only one is held it waits (the engine
                # places GPU requests where GPUs are free); with more GPUs it is granted and starts
                other = c.post("/v1/allocations", json={**body, "max": 1}).json()["id"]
                n_gpus = host["resources"]["gpus"]
                if n_gpus == 1:
                    pc = c.post("/v1/clients", json={"name": "probe", "consumer": "/cpu"}).json()["id"]
                    probe = c.post("/v1/allocations", json={"client": pc, "consumer": "/cpu", "max": 1}).json()["id"]
                    wait(lambda: c.get(f"/v1/allocations/{probe}").json()["held"] == 1, 60,
                         "a plain slot asked after it granted")
                    held = c.get(f"/v1/allocations/{other}").json()["held"]
                    for x in (probe, other):
                        c.delete(f"/v1/allocations/{x}")
                    say(f"{'PASS' if held == 0 else 'FAIL'}: a second GPU allocation with 1 GPU held waits "
                        f"(held {held}, wanted 0)")
                    ok &= held == 0
                    continue
                wait(lambda: c.get(f"/v1/allocations/{other}").json()["held"] == 1, 60, "the second slot granted")
                again = c.post(f"/v1/allocations/{other}/activities", json={"host": "gpu-host", "argv": ["true"]})
                expect = 201
                say(f"{'PASS' if again.status_code == expect else 'FAIL'}: a second GPU start with {n_gpus} GPU(s) "
                    f"-> {again.status_code} {again.json().get('detail', '')} (wanted {expect})")
                ok &= again.status_code == expect
                if again.status_code == 201:  # `true`: let it end, so that what it holds is free again
                    wait(lambda: c.get(f"/v1/activities/{again.json()['id']}").json()["state"]
                         not in ("starting", "running"), 60, "the second start ended")
        for name, act in acts.items():
            got = wait(lambda: "done" in c.get(f"/v1/activities/{act}/output").json()["stdout"] and
                       c.get(f"/v1/activities/{act}").json(), 180, f"{name}: its output")
            c.post(f"/v1/activities/{act}/kill")
            end = wait(lambda: (x := c.get(f"/v1/activities/{act}").json())["state"] not in ("starting", "running")
                       and x, 60, f"{name}: ended")
            out = c.get(f"/v1/activities/{act}/output").json()
            say(f"--- {name} (activity {act}): state={end['state']} user={got['user']} "
                f"devices={json.dumps(got['devices'])} limits={json.dumps(got['limits'])}")
            for line in out["stdout"] + [f"stderr: {x}" for x in out["stderr"]]:
                say(f"{name}: {line}")
            seen = dict(line.split("=", 1) for line in out["stdout"] if line.startswith("CUDA_"))
            want = repr(",".join(map(str, (got["devices"] or {}).get("gpus", []))))
            verdict = seen.get("CUDA_VISIBLE_DEVICES") == want and seen.get("CUDA_DEVICE_ORDER") == "'PCI_BUS_ID'"
            ok &= verdict
            say(f"{'PASS' if verdict else 'FAIL'}: {name} sees CUDA_VISIBLE_DEVICES={seen.get('CUDA_VISIBLE_DEVICES')} "
                f"(wanted {want}) and CUDA_DEVICE_ORDER={seen.get('CUDA_DEVICE_ORDER')}")
            cpus = dict(line.split("=", 1) for line in out["stdout"] if line.startswith("Cpus_")).get(
                "Cpus_allowed_list")
            pinned = (got["devices"] or {}).get("cpus") or []
            want_cpus = ",".join(map(str, pinned))
            pin_ok = cpus is not None and _cpu_list(cpus) == pinned
            ok &= pin_ok
            say(f"{'PASS' if pin_ok else 'FAIL'}: {name} runs on CPUs {cpus} (pinned to {want_cpus}, "
                f"by {got['limits'].get('cpu_pinning') if got['limits'] else None})")
        return 0 if ok else 1
    except Exception as e:  # noqa: BLE001 - the report says what went wrong, and everything is stopped
        say(f"FAIL: {type(e).__name__}: {e}")
        return 1
    finally:
        stop(agent)
        stop(master)
        try:
            from apportion.agent.containment.select import discard

            left = discard(agent_dir)
            say(f"left behind and killed: {left} processes")
        except Exception as e:  # noqa: BLE001
            say(f"cleanup: {e}")
        for name in ("master.log", "agent.log"):
            tail = (work / name).read_text(errors="replace").splitlines()[-40:] if (work / name).exists() else []
            report.extend([f"[{name}] {line}" for line in tail])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(report) + "\n")


if __name__ == "__main__":
    sys.exit(main())
