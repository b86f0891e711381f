"""``apportion run`` end to end: a real master, a real agent, the CLI as a user runs it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apportion.cli.run import new_lines
from tests.service.live import CLI, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /Apps, grace: 2}
  - {path: /Apps/batch, grace: 2}
  - {path: /Other, grace: 2}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    w = tmp_path_factory.mktemp("run")
    m = start_master(w / "m", PLAN)
    agents = [start_agent(m, f"r{i}", w / f"r{i}", slots=1) for i in (1, 2)]
    try:
        with m.http() as c:
            wait_until(lambda: sum(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]) == 2, 30,
                       "two hosts up")
        yield m
    finally:
        for a in agents:
            a.kill()
        m.proc.kill()


def _run(m, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "run", "--master", m.url, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "APPORTION_TOKEN": m.token}, **kw)


def _nothing_left(m) -> None:
    with m.http() as c:
        wait_until(lambda: not c.get("/v1/allocations").json()["allocations"], 10, "every allocation gone")
        assert not [x for x in c.get("/v1/clients").json()["clients"] if x["name"].startswith("run-")]


def test_output_by_host_and_the_worst_exit_code(cluster):
    # the first of the two commands to take the file exits 0, the other 5: run exits with 5
    where = Path(tempfile.mkdtemp(prefix="apportion-run-"))
    where.chmod(0o1777)  # the commands run as the execution user, not as this test
    flag = where / "first"
    code = (f"import os, sys\nprint('hello', flush=True)\ntry:\n    os.close(os.open({str(flag)!r}, "
            "os.O_CREAT | os.O_EXCL | os.O_WRONLY))\nexcept FileExistsError:\n    sys.exit(5)")
    p = _run(cluster, "--consumer", "/Apps/batch", "--slots", "2", "--", sys.executable, "-c", code)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 5, (out, err)
    assert flag.exists()
    shutil.rmtree(where)
    assert sorted(out.splitlines()) == ["[r1] hello", "[r2] hello"], (out, err)
    assert "granted 2 slot(s): r1:1, r2:1" in err
    _nothing_left(cluster)


@pytest.mark.timeout(120)
def test_ctrl_c_stops_the_commands_and_releases(cluster):
    code = "import time\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)"
    p = _run(cluster, "--consumer", "/Apps/batch", "--", sys.executable, "-c", code)
    assert p.stdout.readline().endswith("ready\n")
    with cluster.http() as c:
        act = c.get("/v1/activities", params={"state": "running"}).json()["activities"]
        assert len(act) == 1
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (out, err)
    assert "interrupted: stopping the commands" in err
    with cluster.http() as c:
        assert c.get(f"/v1/activities/{act[0]['id']}").json()["state"] in ("killed", "exited")
    _nothing_left(cluster)


@pytest.mark.timeout(120)
def test_a_reclaim_ends_it_with_a_clear_message(cluster):
    code = "import time\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)"
    p = _run(cluster, "--consumer", "/Apps/batch", "--slots", "2", "--", sys.executable, "-c", code)
    assert p.stdout.readline().endswith("ready\n")
    with cluster.http() as c:
        other = c.post("/v1/clients", json={"name": "other", "consumer": "/Other"}).json()["id"]
        aid = c.post("/v1/allocations", json={"client": other, "consumer": "/Other", "max": 1}).json()["id"]
        out, err = p.communicate(timeout=60)
        assert p.returncode == 75, (out, err)
        assert "reclaimed: 1 slot(s) on r" in err and "for /Other" in err
        wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 1, 20, "/Other granted")
        c.delete(f"/v1/clients/{other}")
    _nothing_left(cluster)


def test_new_lines_continue_a_tail_that_lost_its_start():
    assert new_lines([], ["a", "b"]) == ["a", "b"]
    assert new_lines(["a", "b"], ["a", "b", "c"]) == ["c"]
    assert new_lines(["a", "b", "c"], ["b", "c", "d", "e"]) == ["d", "e"]
    assert new_lines(["x"], ["y"]) == ["y"]


@pytest.mark.timeout(120)
def test_rg_watch_redraws_until_ctrl_c(cluster):
    p = subprocess.Popen([*CLI, "rg", "all", "--watch", "--every", "0.3", "--master", cluster.url],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "APPORTION_TOKEN": cluster.token, "COLUMNS": "200"})
    try:
        with cluster.http() as c:
            seen = ""
            while "/Other" not in seen:
                line = p.stdout.readline()
                assert line, p.stderr.read()
                seen += line
            other = c.post("/v1/clients", json={"name": "watched", "consumer": "/Other"}).json()["id"]
            c.post("/v1/allocations", json={"client": other, "consumer": "/Other", "max": 2})
            # the table is drawn again with /Other holding 2
            line = ""
            while not (line.lstrip("│ ").startswith("/Other") and " 2 " in line):
                line = p.stdout.readline()
                assert line, p.stderr.read()
            c.delete(f"/v1/clients/{other}")
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
    assert p.returncode == 0


@given(st.lists(st.sampled_from("abc"), max_size=8), st.lists(st.sampled_from("abc"), max_size=8),
       st.integers(0, 16))
def test_new_lines_never_lose_or_invent_a_line(old, more, keep):
    # the master's tail after more output: the last `keep` lines of everything so far
    tail = (old + more)[-keep:] if keep else []
    got = new_lines(old, tail)
    assert (old + got)[len(old + got) - len(tail):] == tail  # what was shown then ends with the tail
    assert len(got) <= len(tail)
