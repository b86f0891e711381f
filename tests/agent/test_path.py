"""A bare command name is found on the PATH the agent gives its activities (`--path`), not on
the agent's own: what `apportion job submit -- python3 worker.py` and `apportion run -- tool`
rely on."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.service.live import granted, start_agent, start_master, wait_until

PLAN = "resource_groups: [{name: all, select: 'select(slots > 0)'}]\nconsumers: [{path: /A}]\n"


@pytest.fixture
def tools():
    """A folder of commands every user may run (tmp_path is not: it lies under a 0700 folder)."""
    d = Path(tempfile.mkdtemp(prefix="apportion-tools-"))
    d.chmod(0o755)
    tool = d / "say-hello"
    tool.write_text("#!/bin/sh\necho hello from the path: $PATH\n")
    tool.chmod(0o755)
    yield d
    shutil.rmtree(d)


def _run(c, aid: int, argv: list[str]) -> dict:
    act = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": argv}).json()["id"]
    return wait_until(lambda: (a := c.get(f"/v1/activities/{act}").json())["state"] in ("exited", "failed") and a,
                      30, f"activity {act} ends")


def test_a_bare_name_is_looked_up_on_the_agents_path(tmp_path, tools):
    m = start_master(tmp_path / "m", PLAN)
    default = start_agent(m, "h1", tmp_path / "h1", slots=2)
    try:
        with m.http() as c:
            _, aid = granted(c, "app", "/A", 2)
            done = _run(c, aid, ["say-hello"])  # not on the default path: refused, saying so
            assert done["state"] == "failed" and "say-hello" in (done["stop_reason"] or ""), done
            done = _run(c, aid, ["sh", "-c", "echo $PATH"])  # the default: a standard PATH
            assert done["exit_code"] == 0
            out = c.get(f"/v1/activities/{done['id']}/output").json()["stdout"]
            assert out == ["/usr/local/bin:/usr/bin:/bin"], out
        default.kill()
        told = start_agent(m, "h1", tmp_path / "h1b", slots=2, extra=["--path", f"{tools}:/usr/bin:/bin"])
        try:
            with m.http() as c:
                wait_until(lambda: any(h["name"] == "h1" and h["state"] == "ok"
                                       for h in c.get("/v1/hosts").json()["hosts"]), 30, "h1 back")
                done = _run(c, aid, ["say-hello"])
                assert (done["state"], done["exit_code"]) == ("exited", 0), \
                    (done, c.get(f"/v1/activities/{done['id']}/output").json())
                out = c.get(f"/v1/activities/{done['id']}/output").json()["stdout"]
                assert out == [f"hello from the path: {tools}:/usr/bin:/bin"], out
        finally:
            told.kill()
    finally:
        default.kill()
        m.proc.kill()
