"""The console's Resources page in Debian's chromium, on a real master whose hosts report cores,
memory and GPUs (light agents on loopback): per kind, the cluster's totals, each consumer's use
and dominant share, each host's use and the part of each GPU its activities hold, the same
numbers as ``/v1/hosts`` and ``/v1/consumers``, followed live, within the token's scope."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apportion.client import Client
from tests.console.conftest import Console
from tests.service.test_resource_usage import _granted
from tests.service.test_resource_usage import cluster  # noqa: F401  (a fixture: g1 with 2 GPUs in gpu, c1 in cpu)

SHOTS = Path(__file__).parents[2] / "docs" / "console"


@pytest.fixture(scope="module")
def a_token(cluster) -> str:  # noqa: F811
    """A consumer token for /A."""
    with cluster.http() as c:
        r = c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/A"})
        assert r.status_code == 201, r.text
    return r.json()["token"]


def _cells(con: Console, row: str) -> dict[str, tuple[float, float]]:
    """kind -> (used, total) of a table row, as the page draws it."""
    return {k: (float(u), float(t)) for k, u, t in con.page.eval_on_selector_all(
        f"{row} td.kind", "els => els.map(e => [e.dataset.kind, e.dataset.used, e.dataset.total])")}


def test_resources_by_kind_as_the_api_counts_them_live_and_scoped(browser, cluster, a_token):  # noqa: F811
    m = cluster
    con = Console(browser, m, m.token)
    try:
        con.go("resources")
        n = con.numbers("#kind-totals")
        assert (n["total-slots"], n["total-cores"], n["total-memory"], n["total-gpus"]) == ("8", "24", "96 GB", "2")
        assert n["used-gpus"] == "0"
        assert _cells(con, '[data-host-kinds="g1"]')["gpus"] == (0.0, 2.0)

        with Client(m.url, token=m.token) as api:
            # /B/x: 2 slots of 1 core, 4 GB and half a GPU; /A: 2 slots of 3 cores on c1
            x = _granted(api, "x", "/B/x", "gpu", 2, resources={"cores": 1, "memory": 4, "gpus": 0.5})
            _granted(api, "a", "/A", "cpu", 2, resources={"cores": 3})
            # drawn again by the live feed, no reload
            con.until(lambda: _cells(con, '[data-consumer="/B/x"]').get("gpus") == (1.0, 2.0), "/B/x's GPU drawn")
            hosts = {h["name"]: h for h in api.hosts()}
            rows = {}
            for r in api.consumers():  # summed over the groups, as the page does
                acc = rows.setdefault(r["consumer"], {})
                for k, v in r["resources_used"].items():
                    acc[k] = acc.get(k, 0) + v
            for name, h in hosts.items():
                drawn = _cells(con, f'[data-host-kinds="{name}"]')
                for k in ("slots", "cores", "memory", "gpus"):
                    assert drawn[k] == (h["resources_used"][k], h["resources_total"][k]), (name, k)
            for path in ("/A", "/B", "/B/x", "/B/y"):
                drawn = _cells(con, f'[data-consumer="{path}"]')
                assert {k: u for k, (u, _t) in drawn.items()} == pytest.approx(rows[path]), path
            assert _cells(con, '[data-consumer="/B"]')["gpus"] == (1.0, 2.0)  # its subtree's
            # dominant shares: /B/x half the GPUs; /A 6 of 24 cores, but 32 of 96 GB (its slots' part of
            # c1's memory, as it asked for none): memory
            assert con.text('[data-consumer="/B/x"] [data-k=dominant]') == "50%"
            assert con.text('[data-consumer="/B/x"] td:last-child') == "50% GPUs"
            assert con.text('[data-consumer="/A"] td:last-child') == "33% memory"
            assert con.page.eval_on_selector_all("#kind-consumers th", "els => els.map(e => e.textContent)") == [
                "consumer", "slots", "cores", "memory", "GPUs", "dominant share"]
            fill = con.page.get_attribute('[data-host-kinds="g1"] td[data-kind="gpus"] rect[data-fill]', "data-fill")
            assert float(fill) == 0.5

            # two activities of /B/x take half of GPU 0 each: its square fills
            api.start_activity(x["id"], "g1", ["true"])
            api.start_activity(x["id"], "g1", ["true"])
            con.until(lambda: con.page.get_attribute('[data-host-kinds="g1"] [data-gpu="0"]', "data-part") == "1",
                      "GPU 0 drawn full")
            assert con.page.get_attribute('[data-host-kinds="g1"] [data-gpu="1"]', "data-part") == "0"
            assert con.page.locator('[data-host-kinds="c1"] [data-gpu]').count() == 0  # c1 has none
        if os.environ.get("APPORTION_SCREENSHOTS") == "1":
            SHOTS.mkdir(parents=True, exist_ok=True)
            con.page.screenshot(path=str(SHOTS / "resources.png"))

        # the search keeps the hosts whose name has what was typed
        con.page.fill('#kindsearch [name="name"]', "G1")
        con.page.click("#kindsearch button")
        con.until(lambda: con.page.locator("[data-host-kinds]").count() == 1, "only g1 listed")
        assert con.page.get_attribute("[data-host-kinds]", "data-host-kinds") == "g1"
    finally:
        con.close()

    # a consumer token sees its own subtree, and the rest summed as one line
    con = Console(browser, m, a_token)
    try:
        con.go("resources")
        listed = con.page.eval_on_selector_all("[data-consumer]", "els => els.map(e => e.dataset.consumer)")
        assert listed == ["/A", "others"]
        assert _cells(con, '[data-consumer="others"]')["gpus"] == (1.0, 2.0)  # /B/x's
        assert _cells(con, '[data-consumer="/A"]')["cores"] == (6.0, 24.0)
    finally:
        con.close()


def test_the_kindmap_answers_in_pages_and_refuses_bad_input_naming_the_field(cluster, a_token):  # noqa: F811
    """``/v1/kindmap`` without a browser: a page of hosts at a time, the totals over all of them,
    and a bad query refused (422) naming the field, never a 500."""
    m = cluster
    with m.http() as c:
        one = c.get("/v1/kindmap", params={"limit": 1, "offset": 1}).json()
        assert one["total"] == 2 and [h["name"] for h in one["hosts"]] == ["g1"]
        assert one["kinds"] == ["slots", "cores", "memory", "gpus"]
        assert one["totals"] == {"slots": 8, "cores": 24, "memory": 96, "gpus": 2}
        for bad, field in (({"limit": 0}, "limit"), ({"offset": -1}, "offset"), ({"name": "x" * 201}, "name")):
            r = c.get("/v1/kindmap", params=bad)
            assert r.status_code == 422 and field in r.text, (bad, r.text)
    with m.http(a_token) as c:
        r = c.get("/v1/kindmap")
        assert r.status_code == 200 and [x["consumer"] for x in r.json()["consumers"]] == ["/A"]
    with m.http("nonsense") as c:
        assert c.get("/v1/kindmap").status_code == 401
