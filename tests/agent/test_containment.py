"""The containment levels with real cgroups and real processes: choosing one, limits as written, a
tree with setsid daemons stopped whole at every level, alien processes, a dead agent's subtree
discarded. Tests that need root or a writable cgroup skip, saying which."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from apportion.agent.containment import Containment, ContainmentUnavailable, Limits, choose
from apportion.agent.containment.alien import alien_pids, system_uids
from apportion.agent.containment.cgroup_v1 import CgroupV1
from apportion.agent.containment.procgroup import ProcessGroup
from apportion.agent.containment.procstat import owner
from apportion.agent.containment.select import Cgroups, agent_id, discard, own_cgroups
from apportion.bench.activity_tree import spawn_tree, time_kill
from tests.agent.containment_helpers import (PY, cgroup_level, daemon_argv, gone, need_root, subtree_dirs,
                                             v2_stop_only)
from tests.service.live import wait_until


def test_own_cgroups_from_proc_files(tmp_path: Path) -> None:
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("5:cpu,cpuacct:/a/b\n4:memory:/mem/x\n3:freezer:/\n0::/unit.service\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "31 25 0:27 /mem /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"  # mounted from /mem (a namespace)
        "32 25 0:28 / /sys/fs/cgroup/freezer rw shared:9 - cgroup cgroup rw,freezer\n"
        "33 25 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "34 25 0:30 / /proc rw - proc proc rw\n")
    got = own_cgroups(str(cgroup), str(mountinfo))
    assert got.v1 == {"cpu": Path("/sys/fs/cgroup/cpu,cpuacct/a/b"), "cpuacct": Path("/sys/fs/cgroup/cpu,cpuacct/a/b"),
                      "memory": Path("/sys/fs/cgroup/memory/x"), "freezer": Path("/sys/fs/cgroup/freezer")}
    assert got.v2 == Path("/sys/fs/cgroup/unified/unit.service")


def test_a_named_level_that_cannot_work_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ContainmentUnavailable, match="no v2 cgroup"):
        choose("cgroup-v2", tmp_path, Cgroups())
    with pytest.raises(ContainmentUnavailable, match="no memory hierarchy"):
        choose("cgroup-v1", tmp_path, Cgroups(v1={"pids": tmp_path}))
    with pytest.raises(ContainmentUnavailable, match="one of auto, cgroup-v2"):
        choose("cgroups", tmp_path)
    # v1 whose memory hierarchy cannot be written: refused when named, process tracking under auto
    ro = tmp_path / "ro"
    with pytest.raises(ContainmentUnavailable, match="cannot make"):
        choose("cgroup-v1", tmp_path, Cgroups(v1={"memory": ro / "missing" / "deeper"}))
    assert choose("auto", tmp_path, Cgroups(v1={"memory": ro / "missing" / "deeper"})).level == "process-group"


def test_each_agent_has_its_own_subtree(tmp_path: Path) -> None:
    assert agent_id(tmp_path / "a") != agent_id(tmp_path / "b")
    assert agent_id(tmp_path / "a") == agent_id(tmp_path / "x" / ".." / "a")


def test_auto_picks_a_cgroup_here_and_removes_its_subtree(tmp_path: Path) -> None:
    c = cgroup_level(tmp_path)
    assert c.level in ("cgroup-v2", "cgroup-v1")
    assert subtree_dirs(tmp_path)
    c.close()
    assert subtree_dirs(tmp_path) == []


def test_v1_limits_as_written(tmp_path: Path) -> None:
    need_root()
    try:
        c = CgroupV1(own_cgroups().v1, agent_id(tmp_path))
    except ContainmentUnavailable as e:
        pytest.skip(str(e))
    try:
        box = c.create(3, Limits(memory=64 << 20, swap=16 << 20, cpu_weight=200, cpu_cap=1.5, pids=50))
        box.close_enter()
        mem = box.dirs["memory"]
        assert int((mem / "memory.limit_in_bytes").read_text()) == 64 << 20
        if (mem / "memory.memsw.limit_in_bytes").exists():
            assert int((mem / "memory.memsw.limit_in_bytes").read_text()) == 80 << 20
        if "cpu" in box.dirs:
            assert int((box.dirs["cpu"] / "cpu.shares").read_text()) == 2048
            assert int((box.dirs["cpu"] / "cpu.cfs_quota_us").read_text()) == 150_000
        if "pids" in box.dirs:
            assert (box.dirs["pids"] / "pids.max").read_text().strip() == "50"
        assert box.applied() == {"memory": 64 << 20, "cpu_weight": 200 if "cpu" in box.dirs else None,
                                 "pids": 50 if "pids" in box.dirs else None}
        # an agent restarted reads back what is in force
        assert c.adopt(3, box.key, 0).applied() == box.applied()
        box.remove()
        assert not any(d.exists() for d in box.cgroup_dirs())
    finally:
        c.close()
    assert subtree_dirs(tmp_path) == []


def _containment(kind: str, workdir: Path) -> Containment:
    if kind == "cgroup":
        return cgroup_level(workdir)
    if kind == "cgroup-v2-stop":
        return v2_stop_only(workdir)
    return ProcessGroup(agent_id(workdir))


@pytest.mark.parametrize("kind", ["cgroup", "cgroup-v2-stop", "process-group"])
def test_a_tree_with_setsid_daemons_dies_whole(tmp_path: Path, kind: str) -> None:
    c = _containment(kind, tmp_path)
    box = c.create(1, Limits(pids=200))
    try:
        proc = spawn_tree(c, box, processes=30, daemons=6)
        pids = box.procs()
        assert len(pids) == 30 and proc.pid in pids  # the daemons left the session, and are found
        elapsed = time_kill(c, box, proc)
        assert elapsed < 5
        proc.wait(timeout=5)
        assert all(gone(p) for p in pids)
    finally:
        box.remove()
        c.close()
    assert subtree_dirs(tmp_path) == []


@pytest.mark.parametrize("kind", ["cgroup", "cgroup-v2-stop", "process-group"])
def test_sigterm_reaches_every_process(tmp_path: Path, kind: str) -> None:
    c = _containment(kind, tmp_path)
    box = c.create(1, Limits())
    try:
        proc = spawn_tree(c, box, processes=8, daemons=3)
        pids = box.procs()
        box.signal(signal.SIGTERM)  # frozen meanwhile where the level can; python dies of SIGTERM
        proc.wait(timeout=5)
        wait_until(lambda: all(gone(p) for p in pids), 10, "every process gone after SIGTERM")
        c.refresh([box], force=True)
        assert box.empty()
    finally:
        box.remove()
        c.close()


def test_usage_of_a_busy_box(tmp_path: Path) -> None:
    c = cgroup_level(tmp_path)
    box = c.create(1, Limits())
    try:
        proc = subprocess.Popen([PY, "-c", "x = bytearray(30 << 20)\nwhile True: pass"], preexec_fn=box.enter)
        box.started(proc.pid)
        first = box.usage()
        later = wait_until(lambda: (u := box.usage()).cpu_seconds > first.cpu_seconds + 0.3 and u, 20, "CPU used")
        assert later.memory >= 30 << 20 and later.memory_peak >= later.memory
        box.kill()
        proc.wait(timeout=5)
    finally:
        box.remove()
        c.close()


def test_alien_processes(tmp_path: Path) -> None:
    need_root()
    c = ProcessGroup(agent_id(tmp_path))
    box = c.create(1, Limits())

    def as_uid(uid: int) -> dict:
        return {"user": uid, "group": uid, "extra_groups": []}

    inside = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], env=box.env(), start_new_session=True,
                              **as_uid(54321))
    box.started(inside.pid)
    alien = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], **as_uid(54322))
    system = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], **as_uid(999))
    try:
        wait_until(lambda: owner(alien.pid) == 54322 and owner(inside.pid) == 54321, 10, "the uids switched")
        c.refresh([box], force=True)
        found = alien_pids(c.members([box]), 1000, system_uids(["nobody"]))
        assert alien.pid in found
        assert inside.pid not in found and system.pid not in found and os.getpid() not in found
    finally:
        for p in (inside, alien, system):
            p.kill()
            p.wait()


def test_discard_kills_what_a_dead_agent_left(tmp_path: Path) -> None:
    c = cgroup_level(tmp_path)
    box = c.create(1, Limits())
    proc = subprocess.Popen(daemon_argv(), stdout=subprocess.PIPE, preexec_fn=box.enter, start_new_session=True)
    box.started(proc.pid)
    daemon = int(proc.stdout.readline().split()[1])
    # the agent dies here: its subtree and processes stay, and discard takes them
    assert discard(tmp_path) == 2
    proc.wait(timeout=5)
    wait_until(lambda: gone(daemon), 10, "the daemon gone")
    assert subtree_dirs(tmp_path) == []


def test_v2_files_as_written_and_read(tmp_path: Path) -> None:
    # No machine kind here delegates v2 controllers, so the files are those a v2 kernel shows, in a
    # directory: what the agent writes for the limits, and how it reads usage, OOM kills and emptiness.
    from apportion.agent.containment.cgroup_v2 import CgroupV2

    own = tmp_path / "unit.service"
    own.mkdir()
    (own / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    c = CgroupV2(own, "x")
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (c.root / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    box_dir = c.root / "a5"
    box_dir.mkdir()
    for name in ("cgroup.procs", "memory.max", "memory.swap.max", "cpu.weight", "cpu.max", "pids.max"):
        (box_dir / name).write_text("max\n")
    box = c.create(5, Limits(memory=512 << 20, swap=None, cpu_weight=300, cpu_cap=0.5, pids=64))
    box.close_enter()
    assert [(box_dir / n).read_text() for n in ("memory.max", "memory.swap.max", "cpu.weight", "cpu.max", "pids.max")] \
        == [str(512 << 20), "0", "300", "50000 100000", "64"]
    assert box.applied() == {"memory": 512 << 20, "cpu_weight": 300, "pids": 64}
    (box_dir / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    (box_dir / "memory.current").write_text("1048576\n")
    (box_dir / "memory.peak").write_text("4194304\n")
    (box_dir / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    (box_dir / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    assert box.usage().as_json() == {"cpu_seconds": 2.5, "memory": 1 << 20, "memory_peak": 4 << 20}
    assert box.oom() and not box.empty()
    (box_dir / "cgroup.events").write_text("populated 0\nfrozen 0\n")
    assert box.empty()
    assert c.adopt(5, "a5", 0).applied() == {"memory": 512 << 20, "cpu_weight": 300, "pids": 64}
    (own / "cgroup.controllers").write_text("cpu io\n")
    with pytest.raises(ContainmentUnavailable, match="memory, pids not delegated"):
        CgroupV2(own, "y")
