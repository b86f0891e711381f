"""The store full: writes answer 503 with Retry-After, reads go on, /readyz says why, and the
master takes writes again by itself once there is space; nothing acknowledged is lost. A
master started on a full disk does not say ready.

The disk is real: the SQLite store lies on a small tmpfs of its own (root only), filled
with a file, and the file removed to give the space back."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.service.live import start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
"""


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for a full disk needs root")
    where = tmp_path / "disk"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Every free byte of ``disk`` taken by one file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError as e:
                        assert e.errno == errno.ENOSPC
                        raise
    finally:
        os.close(fd)
    return filler


def checkpoint(db: str) -> None:
    """SQLite's WAL folded into the database and cut to nothing: the next commit must grow it."""
    e = create_engine(db)
    with e.connect() as c:
        c.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
    e.dispose()


def register(c: httpx.Client, name: str) -> httpx.Response:
    return c.post("/v1/clients", json={"name": name, "consumer": "/A"})


def test_a_full_disk_answers_writes_503_serves_reads_and_recovers_by_itself(tmp_path, small_disk):
    db = f"sqlite:///{small_disk / 'apportion.db'}"
    m = start_master(tmp_path / "m", PLAN, db=db)
    try:
        with m.http() as c:
            acked = [register(c, f"before{i}").json()["id"] for i in range(3)]
            checkpoint(db)
            filler = fill(small_disk)
            # writes until one finds the disk full (a commit may still fit in a page SQLite has)
            refused = None
            for i in range(200):
                r = register(c, f"during{i}" + "x" * 150)
                if r.status_code == 201:
                    acked.append(r.json()["id"])
                    continue
                refused = r
                break
            assert refused is not None and refused.status_code == 503, refused and refused.text
            assert int(refused.headers["Retry-After"]) >= 1
            assert "full" in refused.json()["detail"]
            # the next write is answered at the door, at once, the same way
            r = c.post("/v1/allocations", json={"client": acked[0], "consumer": "/A", "max": 1})
            assert r.status_code == 503 and "Retry-After" in r.headers
            # /readyz says why; reads go on
            r = c.get("/readyz")
            assert r.status_code == 503 and "full" in r.json()["reason"], r.text
            listed = {x["id"] for x in c.get("/v1/clients").json()["clients"]}
            assert set(acked) <= listed
            assert c.get("/v1/allocations").status_code == 200
            assert m.proc.alive
            # space back: the master takes writes again by itself
            filler.unlink()
            wait_until(lambda: c.get("/readyz").status_code == 200, 20, "ready again once space is back")
            r = register(c, "after")
            assert r.status_code == 201, r.text
            acked.append(r.json()["id"])
        # nothing acknowledged is lost, through a restart too
        m.restart()
        with m.http() as c:
            listed = {x["id"] for x in c.get("/v1/clients").json()["clients"]}
            assert set(acked) <= listed
            assert len(listed) == len(acked)
    finally:
        m.proc.kill()


def test_a_master_started_on_a_full_disk_does_not_say_ready_and_stays_up(tmp_path, small_disk):
    db = f"sqlite:///{small_disk / 'apportion.db'}"
    m = start_master(tmp_path / "m", PLAN, db=db)
    with m.http() as c:
        acked = register(c, "before").json()["id"]
    checkpoint(db)
    filler = fill(small_disk)
    try:
        # the report: a master killed on a full disk (its WAL left beside the store) and started
        # again said ready, and stopped at its first write
        with m.http() as c:
            wait_until(lambda: register(c, "during").status_code == 503, 20, "the disk found full")
        m.restart(wait=False)
        got = wait_until(lambda: (r := _readyz(m)) is not None and r.status_code == 503 and "reason" in r.json()
                         and r, 30, "a /readyz that says why it is not ready")
        assert "full" in got.json()["reason"]
        with m.http() as c:
            assert c.get(f"/v1/clients/{acked}").status_code == 200
            assert register(c, "during").status_code == 503
        assert m.proc.alive, m.proc.output()[-3000:]
        # a master started on a full disk with no WAL to open: it waits for space, not ready, and stays up
        m.proc.kill()
        filler.unlink()
        checkpoint(db)
        filler = fill(small_disk)
        m.proc.start()
        wait_until(lambda: "the store cannot be opened" in m.proc.output(), 30, "the master saying why it waits")
        assert _readyz(m) is None or _readyz(m).status_code != 200
        assert m.proc.alive, m.proc.output()[-3000:]
        filler.unlink()
        wait_until(lambda: (r := _readyz(m)) is not None and r.status_code == 200, 30, "ready once space is back")
        with m.http() as c:
            assert register(c, "after").status_code == 201
            assert c.get(f"/v1/clients/{acked}").status_code == 200
    finally:
        m.proc.kill()


def _readyz(m) -> httpx.Response | None:
    try:
        return httpx.get(m.url + "/readyz", timeout=2)
    except httpx.HTTPError:
        return None
