"""The soak's short form: two minutes of a real master, 20 agents, mixed work, SIGKILLs of the
master, agents and processes, network partitions (as root: agents in network namespaces whose
links are cut and healed) and hostile requests; every invariant holds, the live-process one
included (apportion bench soak runs the long form; docs/performance.md has its figures).

Beside it: the live-process check finds a slot used twice, from an agent's state file and from a
process no agent lists; partitions cut and heal, and leave nothing behind, even when the soak is
interrupted; without root or ``ip``, --partitions is refused with the reason."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from apportion.bench import netns
from apportion.bench.soak import run_soak
from apportion.bench.soak_live import LiveCheck
from tests.service.live import CLI, granted, start_agent, start_master, wait_until

NO_NETNS = netns.unavailable() if hasattr(os, "geteuid") else "no POSIX uids here"
needs_netns = pytest.mark.skipif(NO_NETNS is not None, reason=f"partitions cannot be made here: {NO_NETNS}")


@pytest.mark.slow
def test_two_minutes_of_faults_partitions_and_hostile_requests_break_no_invariant(tmp_path):
    partitions = NO_NETNS is None  # as root with `ip` (CI); elsewhere the rest of the soak still runs
    r = run_soak(2.0, workdir=tmp_path, partitions=partitions)
    assert r["violations"] == [], r
    assert r["5xx"] == 0
    assert r["restarts"].get("master", 0) >= 1 and r["restarts"].get("agent", 0) >= 1
    assert r["hostile"] >= 50 and r["requests"] >= 1000
    assert r["ids"]["allocation"] >= 20 and r["ids"]["activity"] >= 50 and r["ids"]["token"] >= 1
    assert r["events_checked"] >= 100 and r["writes_audited"] >= 100
    assert r["live"]["samples"] >= 100 and r["live"]["processes"] >= 20, r["live"]
    if partitions:
        cuts = r["partitions"]["cuts"]
        assert sum(cuts.values()) >= 8 and cuts.get("lost", 0) >= 1, r["partitions"]
        assert netns.Network([]).leftovers() == []


def _process(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(["sleep", "120"], env={"PATH": os.environ["PATH"], **env}, start_new_session=True)


def test_the_live_check_finds_slots_used_twice_from_the_agents_reports_and_the_processes(tmp_path):
    m = start_master(tmp_path / "m", "resource_groups:\n  - {name: all, select: \"select(slots > 0)\"}\n"
                                     "consumers:\n  - {path: /A}\n")
    agent = start_agent(m, "h0", tmp_path / "h0", slots=2, extra=["--light"])
    procs: list[subprocess.Popen] = []
    try:
        with m.http() as c:
            _, aid = granted(c, "a", "/A", 2)  # the master gives both of h0's slots to /A
            reports = tmp_path / "reports"  # an agent's work directory: its state file
            reports.mkdir()
            check = LiveCheck({"h0": reports}, {"h0": 2}, m.url)
            check.sample(c)
            assert check.open == {} and check.samples == 1  # nothing runs: nothing is used twice
            told = {"APPORTION_MASTER": m.url, "APPORTION_HOST": "h0", "APPORTION_SLOTS": "1"}
            # a process its agent lists as running for allocation 777, which holds nothing there
            listed = _process({**told, "APPORTION_ACTIVITY": "4242", "APPORTION_ALLOCATION": "777"})
            # and one no agent lists at all, found by its environment
            unlisted = _process({**told, "APPORTION_ACTIVITY": "4343", "APPORTION_ALLOCATION": "778"})
            procs += [listed, unlisted]
            created = psutil.Process(listed.pid).create_time()
            (reports / "state.json").write_text(json.dumps({"activities": {"4242": {
                "allocation": 777, "pid": listed.pid, "create_time": created, "state": "running"}}}))
            wait_until(lambda: (check.sample(c), check.open)[1], 20, "the live check to see the breach")
            for p in procs:
                p.kill()
                p.wait()
            wait_until(lambda: (check.sample(c), not check.open)[1], 20, "the breach to end")
        found = check.finish()
        assert len(found) == 1, found
        v = found[0]
        assert v.startswith("fencing: host h0, ") and "4 slots taken of 2" in v, v
        assert f"the master holds {{{aid}: 2}}" in v, v
        assert (f"activity 4242 of allocation 777 (pid {listed.pid}, 1 slot(s), in its agent's state file; "
                "the master says it does not know it)") in v, v
        assert (f"activity 4343 of allocation 778 (pid {unlisted.pid}, 1 slot(s), NOT in its agent's state file "
                "(state file: absent); the master says it does not know it)") in v, v
        assert "host state ok" in v, v
        assert check.figures()["not_in_state_file"] == 1 and check.figures()["processes"] == 2
    finally:
        for p in procs:
            p.kill()
            p.wait()
        agent.kill()
        m.proc.kill()


def _connects(net: netns.Network, group: str, port: int) -> bool:
    probe = f"import socket; socket.create_connection(({net.master!r}, {port}), timeout=2).close()"
    return subprocess.run([*net.prefix(group), sys.executable, "-c", probe], capture_output=True,
                          timeout=30).returncode == 0


@needs_netns
def test_a_cut_link_stops_a_namespace_reaching_the_master_until_healed_and_nothing_is_left():
    import socket

    net = netns.Network(["a", "b"]).create()
    try:
        with socket.socket() as s:
            s.bind((net.master, 0))
            s.listen(16)
            port = s.getsockname()[1]
            assert _connects(net, "a", port) and _connects(net, "b", port)
            net.cut_link("a")
            assert not _connects(net, "a", port)
            assert _connects(net, "b", port)  # one cut leaves the others alone
            net.heal("a")
            assert _connects(net, "a", port)
            outside = subprocess.run([*net.prefix("a"), sys.executable, "-c",
                                      "import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)"],
                                     capture_output=True, timeout=30)
            assert outside.returncode != 0  # only the master's address is reachable from inside
    finally:
        assert net.close() == []
    assert net.leftovers() == []


@needs_netns
def test_what_a_killed_run_left_is_swept_by_the_next():
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer lives: a run SIGKILLed before it could clean up
    stale = netns.Network(["x"], pid=gone.pid).create()
    assert stale.leftovers()  # its namespace, veth end and address are there
    swept = netns.sweep()
    assert f"aps-{gone.pid}-0" in swept
    wait_until(lambda: stale.leftovers() == [], 15, "the stale run's namespace and veth to go")


@needs_netns
def test_an_interrupted_soak_with_partitions_stops_everything_and_removes_its_namespaces(tmp_path):
    work = tmp_path / "w"
    soak = subprocess.Popen([*CLI, "bench", "soak", "--partitions", "--minutes", "5", "--agents", "4",
                             "--workdir", str(work)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        made = netns.Network([], pid=soak.pid)
        wait_until(lambda: len(made.leftovers()) >= 4 or soak.poll() is not None, 120, "the namespaces")
        # under way: activities have run on the agents in the namespaces
        wait_until(lambda: any((work / "agents" / f"real{i}" / "state.json").exists() for i in range(4))
                   or soak.poll() is not None, 120, "an activity to start")
        assert soak.poll() is None, soak.stdout.read().decode()
        soak.send_signal(signal.SIGTERM)
        out = soak.communicate(timeout=120)[0].decode()
        assert soak.returncode == 130, out
        assert "interrupted" in out, out
        assert made.leftovers() == []
        left = []
        for p in psutil.process_iter():
            try:
                if str(work) in " ".join(p.cmdline()) or Path(p.cwd()).is_relative_to(work):
                    left.append(p)
            except (psutil.Error, OSError):
                continue
        assert left == [], [(p.pid, p.cmdline()) for p in left]
    finally:
        if soak.poll() is None:
            os.killpg(soak.pid, signal.SIGKILL)
            soak.wait()
        netns.sweep()


@pytest.mark.parametrize("why", ["not root", "no ip"])
def test_partitions_are_refused_with_the_reason_without_root_or_ip(tmp_path, why):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    kw: dict = {}
    if why == "not root":
        if os.geteuid() == 0:
            if not Path(sys.executable).exists() or not os.access(sys.executable, os.X_OK):
                pytest.skip("the interpreter cannot be run by another user")
            kw = {"user": 65534, "group": 65534, "extra_groups": []}
        expected = "--partitions needs root"
    else:
        if os.geteuid() != 0:
            pytest.skip("without root, root is what is missing first")
        empty = tmp_path / "bin"
        empty.mkdir()
        env["PATH"] = str(empty)
        expected = "--partitions needs iproute2's `ip`"
    r = subprocess.run([*CLI, "bench", "soak", "--partitions", "--minutes", "0.1"], capture_output=True, text=True,
                       env=env, cwd="/", timeout=120, **kw)
    assert r.returncode == 2, r.stdout + r.stderr
    assert expected in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_the_soak_reads_which_options_the_server_takes():
    from apportion.bench.soak import server_options

    got = server_options()  # --host-lost-after goes to the master only where this lists it
    assert "--heartbeat" in got and "--kill-grace" in got, got
