"""schemathesis against the OpenAPI spec a real master serves: no 5xx, and no answer
that breaks the spec's own schema.

The event stream's GET is left out: without ``after``/``wait`` it is a Server-Sent
Events stream that by design never ends, which a request-and-response fuzzer can only
time out on (tests/service and tests/client cover it). Everything else is in.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.live import host_state, start_agent, start_master, wait_until

pytestmark = pytest.mark.slow  # each a minute or less of fuzzing: started first (tests/conftest.py)

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A, grace: 5}
  - {path: /B}
"""


def fuzz(m, *paths: str) -> None:  # noqa: ANN001
    """schemathesis over the paths chosen: no 5xx, no answer outside the spec, the master alive."""
    st = Path(sys.executable).with_name("schemathesis")
    r = subprocess.run(
        [str(st), "run", f"{m.url}/openapi.json", "-H", f"Authorization: Bearer {m.token}",
         "--checks", "not_a_server_error,response_schema_conformance", *paths,
         "--max-examples", "12", "--workers", "1", "--request-timeout", "30", "--seed", "20261125",
         "--max-failures", "10"],
        capture_output=True, text=True, timeout=600)
    tail = (r.stdout + r.stderr)[-6000:]
    print(tail)  # what ran (phases, operations, links followed): in the log when the test is run with -s
    assert r.returncode == 0, tail
    assert "Server error" not in tail and "violates schema" not in tail
    assert m.proc.alive, "the master died under the fuzzer:\n" + m.proc.output()[-3000:]


def test_schemathesis_finds_no_server_error(tmp_path):
    m = start_master(tmp_path / "m", PLAN)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=4, extra=["--light"])
    try:
        wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
        with m.http() as c:  # something for the fuzzer to find
            client = c.post("/v1/clients", json={"name": "fuzz", "consumer": "/A"}).json()["id"]
            c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 2})
        fuzz(m, "--exclude-path-regex", "/events$")
    finally:
        agent.kill()
        m.proc.kill()


DUCC_PLAN = "ducc:\n  properties: {ducc.rm.share.quantum: 1}\n"


def test_schemathesis_finds_no_server_error_on_a_ducc_master(tmp_path):
    m = start_master(tmp_path / "m", DUCC_PLAN)
    agent = start_agent(m, "h1", tmp_path / "h1", extra=["--light", "--memory", "8"])
    try:
        wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
        with m.http() as c:  # something for the fuzzer to find: a job, a reservation, a service
            c.post("/v1/jobs", json={"memory": 2, "work": list(range(5)), "argv": ["true"]})
            c.post("/v1/reservations", json={"class": "reserve", "memory": 8})
            c.post("/v1/services", json={"class": "fixed", "memory": 1, "argv": ["true"]})
        fuzz(m, "--include-path-regex", "^/v1/(jobs|reservations|services|occupancy|reconfigure|hosts)")
    finally:
        agent.kill()
        m.proc.kill()


def test_schemathesis_stateful_chains_find_no_server_error(tmp_path):
    """The stateful phase: calls chained through the spec's links (a client made, then its
    allocations, their activities, changes, releases, kills and deletes), with ids from the
    answers, so the fuzzer reaches objects that exist."""
    m = start_master(tmp_path / "m", PLAN)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=4, extra=["--light"])
    try:
        wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
        fuzz(m, "--phases", "stateful", "--include-path-regex", "^/v1/(clients|allocations|activities)",
             "--exclude-path-regex", "/events$")
    finally:
        agent.kill()
        m.proc.kill()
