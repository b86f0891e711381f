"""/healthz, /readyz and Prometheus /metrics on a real master; JSON log lines."""

from __future__ import annotations

import json

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.service.live import host_state, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
  - {path: /B}
"""


def test_health_metrics_and_logs(tmp_path):
    m = start_master(tmp_path / "m", PLAN)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=4, extra=["--light"])
    try:
        assert httpx.get(m.url + "/healthz").json() == {"status": "ok", "role": "leader", "leader": m.url}
        assert httpx.get(m.url + "/readyz").json()["status"] == "ready"
        assert httpx.get(m.url + "/metrics").status_code == 401  # authenticated like the rest
        wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
        with m.http() as c:
            client = c.post("/v1/clients", json={"name": "obs", "consumer": "/A"}).json()["id"]
            aid = c.post("/v1/allocations", json={"client": client, "consumer": "/A", "max": 6}).json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 4, 20, "granted 4")
            text = c.get("/metrics").text
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        assert samples[("apportion_cycle_seconds_count", ())] >= 1
        assert samples[("apportion_decisions_total", (("kind", "grant"),))] >= 1
        assert samples[("apportion_open_allocations", ())] == 1
        assert samples[("apportion_unmet_slots", ())] == 2
        assert samples[("apportion_agents_up", ())] == 1
        assert samples[("apportion_consumer_held_slots", (("consumer", "/A"), ("group", "all")))] == 4
        assert samples[("apportion_consumer_shortfall_slots", (("consumer", "/A"), ("group", "all")))] == 0
        assert ("apportion_consumer_deserved_slots", (("consumer", "/A"), ("group", "all"))) in samples
        # the interactive docs load their assets from the master itself, not from a CDN
        page = httpx.get(m.url + "/docs").text
        assert "/static/swagger-ui-bundle.js" in page and "cdn" not in page.lower()
        assert httpx.get(m.url + "/static/swagger-ui-bundle.js").status_code == 200
        assert httpx.get(m.url + "/openapi.json").json()["paths"]["/v1/allocations"]
    finally:
        agent.kill()
        m.proc.kill()
    lines = [ln for ln in m.proc.output().splitlines() if ln.strip()]
    assert lines and all(isinstance(json.loads(ln), dict) for ln in lines), "a log line that is not JSON"
