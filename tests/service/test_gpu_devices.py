"""GPUs and pinned cores end to end: a real master, a real root agent told of two GPUs
(`--gpus 0,1`) whose device nodes are fake ones made with mknod in a temporary directory
(`--dev-dir`), real processes in real cgroups.

- an allocation that asks for `resources: {gpus: 1}` per slot gets one GPU per activity, never
  one another live activity holds; its process sees CUDA_VISIBLE_DEVICES with exactly that index
  and CUDA_DEVICE_ORDER=PCI_BUS_ID; an activity without GPUs sees CUDA_VISIBLE_DEVICES empty;
- under cgroup v1 the devices controller refuses it the other GPU's node (EPERM) and lets it open
  its own and nvidiactl (ENXIO: the fake node has no driver behind it);
- the engine places GPU requests: a third allocation of one GPU waits while two hold the host's
  two; once an activity ends its GPU is free again for its allocation; after a restart the master
  still knows who holds what; an allocation deleted while its process runs frees its GPU for the
  waiting one once that process is gone;
- `--pin-cores`: each activity gets its own CPUs (Cpus_allowed_list), two half-GPU slots share
  the one device, a third waits; `resources.memory` is its memory limit.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.live import Master, granted, reap, start_agent, start_master, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mknod, cgroups, switching users")

NVIDIA = 195  # the nvidia driver's character major
PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
  - {path: /B}
  - {path: /C}
  - {path: /D}
"""
PROBE = """
import errno, os, sys, time
d = sys.argv[1]
print("CUDA_VISIBLE_DEVICES=" + repr(os.environ.get("CUDA_VISIBLE_DEVICES")), flush=True)
print("CUDA_DEVICE_ORDER=" + os.environ.get("CUDA_DEVICE_ORDER", "-"), flush=True)
for n in ("nvidia0", "nvidia1", "nvidiactl"):
    try:
        os.close(os.open(os.path.join(d, n), os.O_RDWR))
        r = "opened"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print(n, r, flush=True)
for line in open("/proc/self/status"):
    if line.startswith("Cpus_allowed_list"):
        print("cpus", line.split()[1], flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.fixture
def dev_dir() -> Iterator[Path]:
    """nvidia0, nvidia1 and nvidiactl as character nodes of the nvidia major, readable by anyone
    (the execution user's permission check comes before the devices cgroup's)."""
    d = Path(tempfile.mkdtemp(prefix="apportion-dev-"))
    try:
        os.chmod(d, 0o755)
        for name, minor in (("nvidia0", 0), ("nvidia1", 1), ("nvidiactl", 255)):
            os.mknod(d / name, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA, minor))
            os.chmod(d / name, 0o666)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _v1_writable(controller: str) -> bool:
    from apportion.agent.containment.select import own_cgroups

    d = own_cgroups().v1.get(controller)
    return d is not None and os.access(d, os.W_OK)


def _start(c: httpx.Client, aid: int, host: str, dev: Path, slots: int = 1) -> httpx.Response:
    return c.post(f"/v1/allocations/{aid}/activities",
                  json={"host": host, "argv": [sys.executable, "-c", PROBE, str(dev)], "slots": slots,
                        # declared, and overridden: an activity cannot widen its own GPUs
                        "env": {"CUDA_VISIBLE_DEVICES": "0,1"}})


def _ask(c: httpx.Client, name: str, consumer: str, **body: Any) -> int:
    """An allocation of one slot asked for, not waited for: its id."""
    client = c.post("/v1/clients", json={"name": name, "consumer": consumer}).json()["id"]
    r = c.post("/v1/allocations", json={"client": client, "consumer": consumer, "max": 1, **body})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _seen(c: httpx.Client, act: int) -> dict[str, str]:
    def look() -> dict[str, str] | None:
        out = c.get(f"/v1/activities/{act}/output").json()["stdout"]
        if not any(line.startswith("cpus") for line in out):
            return None
        return dict(line.split("=", 1) if "=" in line else line.split(" ", 1) for line in out)
    return wait_until(look, 30, f"activity {act} printed what it sees")


def _stop_all(m: Master, agents: list[Any]) -> None:
    import signal

    for a in agents:
        a.kill(signal.SIGTERM)
    m.proc.kill()
    reap()


def test_gpus_are_handed_out_whole_isolated_and_remembered(tmp_path: Path, dev_dir: Path) -> None:
    m = start_master(tmp_path, PLAN, extra=["--tick", "0.3"])
    agent = start_agent(m, "g1", tmp_path / "g1", slots=4, extra=["--gpus", "0,1", "--dev-dir", str(dev_dir)])
    try:
        with m.http() as c:
            host = wait_until(lambda: next((h for h in c.get("/v1/hosts").json()["hosts"]
                                            if h["state"] == "ok" and h["resources"]), None), 30, "g1 up")
            res = host["resources"]
            assert res["gpus"] == 2 and [d["index"] for d in res["devices"]] == [0, 1], res
            cgroup = host["containment"] == "cgroup-v1" and _v1_writable("devices")

            _, a = granted(c, "a", "/A", 1, resources={"gpus": 1, "memory": 0.5})
            _, b = granted(c, "b", "/B", 1, resources={"gpus": 1})
            cc = _ask(c, "c", "/C", resources={"gpus": 1})  # both GPUs held: it waits
            _, d = granted(c, "d", "/D", 1)  # asked after it: the cycles that served d passed it over
            assert c.get(f"/v1/allocations/{cc}").json()["held"] == 0
            r1 = _start(c, a, "g1", dev_dir)
            assert r1.status_code == 201 and r1.json()["devices"] == {"gpus": [0]}, r1.text
            r2 = _start(c, b, "g1", dev_dir)
            assert r2.status_code == 201 and r2.json()["devices"] == {"gpus": [1]}, r2.text
            r3 = _start(c, cc, "g1", dev_dir)  # it holds nothing there: refused, nothing started
            assert r3.status_code == 422 and "holds nothing" in r3.text, r3.text
            assert c.get("/v1/activities", params={"allocation": cc}).json()["activities"] == []
            r4 = _start(c, d, "g1", dev_dir)  # no GPUs asked for: none visible
            assert r4.status_code == 201 and r4.json()["devices"] is None, r4.text

            one, two, none = (_seen(c, r.json()["id"]) for r in (r1, r2, r4))
            assert one["CUDA_VISIBLE_DEVICES"] == "'0'" and two["CUDA_VISIBLE_DEVICES"] == "'1'", (one, two)
            assert none["CUDA_VISIBLE_DEVICES"] == "''", none
            assert one["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" == none["CUDA_DEVICE_ORDER"]
            limits = wait_until(lambda: c.get(f"/v1/activities/{r1.json()['id']}").json()["limits"], 20, "limits")
            assert limits["gpus"] == [0] and limits["memory"] == 2**29, limits  # what it asked for
            assert limits["devices"] == ("cgroup-v1" if cgroup else "environment"), limits
            if cgroup:
                # its own node and nvidiactl open as far as the (absent) driver; the other GPU is denied
                assert (one["nvidia0"], one["nvidia1"], one["nvidiactl"]) == ("ENXIO", "EPERM", "ENXIO"), one
                assert (two["nvidia0"], two["nvidia1"]) == ("EPERM", "ENXIO"), two
                assert (none["nvidia0"], none["nvidia1"], none["nvidiactl"]) == ("EPERM", "EPERM", "ENXIO"), none

            # the master restarts: it still knows who holds what, and GPU 0 is free again for a once
            # its activity ends
            m.restart()
            assert c.get(f"/v1/allocations/{cc}").json()["held"] == 0
            assert [c.get(f"/v1/allocations/{x}").json()["hosts"] for x in (a, b)] == [{"g1": 1}, {"g1": 1}]
            assert {h["name"]: h for h in c.get("/v1/hosts").json()["hosts"]}["g1"]["devices_used"]["gpus"] == \
                {"0": 1.0, "1": 1.0}
            c.post(f"/v1/activities/{r1.json()['id']}/kill")
            wait_until(lambda: c.get(f"/v1/activities/{r1.json()['id']}").json()["state"] == "killed", 30, "ended")
            r5 = _start(c, a, "g1", dev_dir)
            assert r5.status_code == 201 and r5.json()["devices"] == {"gpus": [0]}, r5.text
            assert _seen(c, r5.json()["id"])["CUDA_VISIBLE_DEVICES"] == "'0'"
            # b goes while its process runs: c gets its GPU once that process is gone
            assert c.delete(f"/v1/allocations/{b}").status_code == 204
            wait_until(lambda: c.get(f"/v1/allocations/{cc}").json()["held"] == 1, 30, "c granted")
            assert c.get(f"/v1/activities/{r2.json()['id']}").json()["state"] == "killed"
            r6 = _start(c, cc, "g1", dev_dir)
            assert r6.status_code == 201 and r6.json()["devices"] == {"gpus": [1]}, r6.text
    finally:
        _stop_all(m, [agent])


def test_pinned_cores_and_shared_gpu(tmp_path: Path, dev_dir: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs to pin two activities apart")
    m = start_master(tmp_path, PLAN, extra=["--tick", "0.3"])
    agent = start_agent(m, "p1", tmp_path / "p1", slots=4,
                        extra=["--gpus", "1", "--pin-cores", "--cores", "2", "--dev-dir", str(dev_dir)])
    try:
        with m.http() as c:
            host = wait_until(lambda: next((h for h in c.get("/v1/hosts").json()["hosts"] if h["state"] == "ok"),
                                           None), 30, "p1 up")
            assert host["resources"]["pin_cores"] and len(host["resources"]["cpus"]) == 2, host
            cpuset = host["containment"] == "cgroup-v1" and _v1_writable("cpuset")
            _, a = granted(c, "a", "/A", 1, resources={"gpus": 0.5, "cores": 1})
            _, b = granted(c, "b", "/B", 1, resources={"gpus": 0.5, "cores": 1})
            r1, r2 = _start(c, a, "p1", dev_dir), _start(c, b, "p1", dev_dir)
            assert r1.status_code == r2.status_code == 201, (r1.text, r2.text)
            d1, d2 = r1.json()["devices"], r2.json()["devices"]
            # half a GPU each: the same device, shared; one core each, not the same
            assert d1["gpus"] == d2["gpus"] == [0] and d1["gpu_share"] == d2["gpu_share"] == 0.5, (d1, d2)
            assert len(d1["cpus"]) == len(d2["cpus"]) == 1 and d1["cpus"] != d2["cpus"], (d1, d2)
            s1, s2 = _seen(c, r1.json()["id"]), _seen(c, r2.json()["id"])
            assert s1["cpus"] == str(d1["cpus"][0]) and s2["cpus"] == str(d2["cpus"][0]), (s1, s2, d1, d2)
            assert s1["CUDA_VISIBLE_DEVICES"] == s2["CUDA_VISIBLE_DEVICES"] == "'0'"
            limits = c.get(f"/v1/activities/{r1.json()['id']}").json()["limits"]
            assert limits["cpus"] == d1["cpus"], limits
            assert limits["cpu_pinning"] == ("cpuset" if cpuset else "affinity"), limits
            cc = _ask(c, "c", "/C", resources={"gpus": 0.5, "cores": 1})  # no core, and no half GPU, left
            # asked after it, and fits (its cores are all held: no plain slot would): the cycles
            # that served d passed c over
            granted(c, "d", "/D", 1, resources={"memory": 0.25})
            assert c.get(f"/v1/allocations/{cc}").json()["held"] == 0
    finally:
        _stop_all(m, [agent])


def test_bad_resources_are_refused_naming_the_field(tmp_path: Path) -> None:
    m = start_master(tmp_path, PLAN)
    try:
        with m.http() as c:
            client = c.post("/v1/clients", json={"name": "x", "consumer": "/A"}).json()["id"]
            for bad, field in (({"gpus": -1}, "gpus"), ({"gpus": 5000}, "gpus"), ({"cores": "2"}, "cores"),
                               ({"gpu_model": "H100\n"}, "gpu_model"), ({"disks": 1}, "disks")):
                r = c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 1, "resources": bad})
                assert r.status_code == 422 and field in r.text, (bad, r.text)
            base = {"slots": 1, "memory": 1.0, "os": "Linux"}
            for bad, field in (({"gpus": 1, "devices": [{"index": 1024}]}, "index"),
                               ({"custom": {"fp ga": 1}}, "custom"), ({"cpus": [0, 5000]}, "cpus"),
                               ({"gpu_model": "x\x00"}, "gpu_model")):
                r = c.post("/v1/agents/h9/register", json={**base, "resources": bad})
                assert r.status_code == 422 and field in r.text, (bad, r.text)
            assert c.get("/v1/hosts").json()["hosts"] == []
            assert [a for a in c.get("/v1/allocations").json()["allocations"]] == []
    finally:
        m.proc.kill()
