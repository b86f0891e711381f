"""Usage per resource kind where people look, on a real master with light agents on loopback:
`/v1/hosts` (`resources_total`, `resources_used`, `devices_used`), `/v1/consumers`
(`resources_used`, a parent's its subtree's), the allocation's `devices`, Prometheus, and
`apportion host list` / `consumer list`; the SDK's `allocate(resources=...)` with a GPU share."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apportion.client import Client
from tests.service.live import start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: gpu, hosts: [g1]}
  - {name: cpu, hosts: [c1]}
consumers:
  - {path: /A}
  - {path: /B}
  - {path: /B/x}
  - {path: /B/y}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("kinds")
    m = start_master(tmp / "m", PLAN, extra=["--tick", "0.2"])
    g1 = start_agent(m, "g1", tmp / "g1", slots=4, extra=["--light", "--gpus", "2", "--cores", "8", "--memory", "32"])
    c1 = start_agent(m, "c1", tmp / "c1", slots=4, extra=["--light", "--cores", "16", "--memory", "64", "--gpus", "0"])
    try:
        with Client(m.url, token=m.token) as api:
            wait_until(lambda: sum(h["state"] == "ok" for h in api.hosts()) == 2, 30, "g1 and c1 up")
        yield m
    finally:
        g1.kill()
        c1.kill()
        m.proc.kill()


def _granted(api: Client, name: str, consumer: str, group: str, n: int, **kw) -> dict:
    api.register(name, consumer)
    a = api.allocate(consumer, group, n, n, **kw)
    return wait_until(lambda: (x := api.allocation(a["id"]))["held"] == n and x, 20, f"{name} granted {n}")


def _metrics(m) -> dict[tuple[str, tuple], float]:
    with m.http() as c:
        text = c.get("/metrics").text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_usage_per_kind_where_people_look(cluster) -> None:
    m = cluster
    with Client(m.url, token=m.token) as api:
        hosts = {h["name"]: h for h in api.hosts()}
        assert hosts["g1"]["resources_total"] == {"slots": 4, "cores": 8, "memory": 32, "gpus": 2}
        assert hosts["g1"]["resources_used"] == {"slots": 0, "cores": 0, "memory": 0, "gpus": 0}
        assert hosts["g1"]["devices_used"] == {"gpus": {}, "cpus": []}

        # /B/x: 2 slots of 1 core, 4 GB and half a GPU each; /B/y: 1 plain slot on g1 (a quarter of
        # its cores and memory, no GPU); /A: 2 slots of 3 cores on c1, memory its part (16 GB)
        x = _granted(api, "x", "/B/x", "gpu", 2, resources={"cores": 1, "memory": 4, "gpus": 0.5})
        assert x["resources"] == {"cores": 1, "memory": 4, "gpus": 0.5, "gpu_model": None}
        y = _granted(api, "y", "/B/y", "gpu", 1)
        a = _granted(api, "a", "/A", "cpu", 2, resources={"cores": 3})
        assert x["hosts"] == {"g1": 2} and y["hosts"] == {"g1": 1} and a["hosts"] == {"c1": 2}

        hosts = {h["name"]: h for h in api.hosts()}
        assert hosts["g1"]["resources_used"] == {"slots": 3, "cores": 4, "memory": 16, "gpus": 1}
        assert hosts["c1"]["resources_used"] == {"slots": 2, "cores": 6, "memory": 32, "gpus": 0}
        assert hosts["c1"]["resources_total"]["gpus"] == 0

        rows = {(r["consumer"], r["group"]): r["resources_used"] for r in api.consumers()}
        assert rows[("/B/x", "gpu")] == {"slots": 2, "cores": 2, "memory": 8, "gpus": 1}
        assert rows[("/B/y", "gpu")] == {"slots": 1, "cores": 2, "memory": 8, "gpus": 0}
        assert rows[("/B", "gpu")] == {"slots": 3, "cores": 4, "memory": 16, "gpus": 1}  # its subtree's
        assert rows[("/A", "cpu")] == {"slots": 2, "cores": 6, "memory": 32, "gpus": 0}
        assert rows[("/A", "gpu")]["slots"] == 0

        # the light agent reports each start running; the master hands out the device shares
        s1 = api.start_activity(x["id"], "g1", ["true"])
        s2 = api.start_activity(x["id"], "g1", ["true"])
        assert s1["devices"] == s2["devices"] == {"gpus": [0], "gpu_share": 0.5}
        x = api.allocation(x["id"])
        assert x["devices"] == {"g1": [{"activity": s1["id"], "gpus": [0], "gpu_share": 0.5},
                                       {"activity": s2["id"], "gpus": [0], "gpu_share": 0.5}]}
        assert api.allocation(y["id"])["devices"] == {}
        assert {h["name"]: h for h in api.hosts()}["g1"]["devices_used"] == {"gpus": {"0": 1.0}, "cpus": []}
        assert [z for z in api.allocations() if z["id"] == x["id"]][0]["devices"] == x["devices"]

        # a whole GPU: the device no share is on
        w = _granted(api, "w", "/A", "gpu", 1, resources={"gpus": 1})
        assert api.start_activity(w["id"], "g1", ["true"])["devices"] == {"gpus": [1]}
        assert {h["name"]: h for h in api.hosts()}["g1"]["devices_used"] == {"gpus": {"0": 1.0, "1": 1.0},
                                                                            "cpus": []}

    samples = _metrics(m)
    assert samples[("apportion_host_resource_used", (("host", "g1"), ("kind", "gpus")))] == 2  # x 1, w 1
    assert samples[("apportion_host_resource_used", (("host", "c1"), ("kind", "cores")))] == 6
    assert samples[("apportion_host_resource_capacity", (("host", "g1"), ("kind", "gpus")))] == 2
    assert samples[("apportion_host_resource_capacity", (("host", "c1"), ("kind", "memory")))] == 64
    assert samples[("apportion_resource_capacity", (("kind", "cores"),))] == 24
    assert samples[("apportion_resource_used", (("consumer", "/B"), ("kind", "gpus")))] == 1
    assert samples[("apportion_resource_used", (("consumer", "/A"), ("kind", "gpus")))] == 1  # w
    assert samples[("apportion_resource_used", (("consumer", "/A"), ("kind", "cores")))] == 6 + 2  # a; w: g1's part
    assert samples[("apportion_resource_used", (("consumer", "/B/y"), ("kind", "slots")))] == 1


def test_the_cli_shows_kinds_where_a_host_has_gpus(cluster) -> None:
    from typer.testing import CliRunner

    from apportion.cli import live
    from apportion.cli.main import app

    m = cluster
    with Client(m.url, token=m.token) as api:
        for z in api.allocations():
            api.delete(z["id"])
        wait_until(lambda: all(h["free"] == h["slots"] for h in api.hosts()), 20, "all free again")
        _granted(api, "k", "/B/x", "gpu", 2, resources={"cores": 1, "memory": 4, "gpus": 0.5})
    live.out.width = live.err.width = 250
    env = {"APPORTION_MASTER": m.url, "APPORTION_TOKEN": m.token, "APPORTION_TOKEN_FILE": None, "COLUMNS": "250"}
    r = CliRunner().invoke(app, ["host", "list"], env=env)
    assert r.exit_code == 0, r.output
    head = next(line for line in r.output.splitlines() if "NAME" in line)
    assert "CORES" in head and "MEM GB" in head and "GPUS" in head, r.output
    g1 = next(line.split() for line in r.output.splitlines() if line.split()[:1] == ["g1"])
    assert g1[7:10] == ["2/8", "8/32", "1/2"], r.output
    r = CliRunner().invoke(app, ["consumer", "list"], env=env)
    assert r.exit_code == 0 and "GPUS" in r.output, r.output
    bx = next(line for line in r.output.splitlines() if "/B/x" in line and "gpu" in line)
    assert bx.split()[-3:] == ["2", "8", "1"], r.output
    r = CliRunner().invoke(app, ["consumer", "list", "--json"], env=env)
    assert r.exit_code == 0 and '"resources_used"' in r.output
