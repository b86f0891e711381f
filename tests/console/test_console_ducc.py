"""The console on a master serving a DUCC plan, in Debian's chromium, with real agents and
real worker processes: Jobs follows a job's items to done, live; Machines and Classes show
what the API says."""

from __future__ import annotations

import pytest

from tests.console.conftest import Console
from tests.console.test_console_ego import _shot
from tests.service.test_ducc_live import SERVICE, ducc_master, job, stop, worker


@pytest.fixture(scope="module")
def ducc(tmp_path_factory):
    m, agents = ducc_master(tmp_path_factory.mktemp("ducc"), {"d0": 4, "d1": 4})
    try:
        yield m
    finally:
        stop(m, agents)


def test_jobs_machines_and_classes_follow_the_api(browser, ducc):
    m = ducc
    con = Console(browser, m, m.token)
    try:
        assert "Jobs" in con.text("#nav") and "Consumers" not in con.text("#nav")
        with m.http() as c:
            jid = c.post("/v1/jobs", json={"user": "ann", "memory": 2, "threads": 1, "work": list(range(30)),
                                           "argv": worker(0.1)}).json()["id"]
            con.go("jobs")
            row = f"tr[data-job='{jid}']"
            con.until(lambda: con.page.locator(f"{row} [data-k=processes]").inner_text() != "0",
                      "the job's processes shown", timeout=60)
            con.until(lambda: int(con.page.locator(f"{row} [data-k=items]").inner_text().split("/")[0]) > 0,
                      "items done shown as they are done", timeout=60)
            marker = con.page.evaluate("() => (window.__same = 7)")
            _shot(con, "jobs")
            con.until(lambda: con.page.locator(f"{row} [data-k=state]").inner_text() == "done", "the job done",
                      timeout=90)
            assert con.page.locator(f"{row} [data-k=items]").inner_text() == "30/30/0"
            assert con.page.evaluate("() => window.__same") == marker, "the page was reloaded"
            j = job(c, jid)
            assert j["state"] == "done" and j["items"]["done"] == 30

            con.go("machines")

            def machines_as_the_api_says() -> bool:
                # the job's processes exit after it is done, and their quanta come free only once each is
                # gone: the page follows that live, so it is compared until both have settled
                shown = con.page.eval_on_selector_all("tr[data-machine]", """els => els.map(e => [
                    e.dataset.machine, e.querySelector('[data-k=order]').textContent,
                    e.querySelector('[data-k=free]').textContent])""")
                return bool(shown) and shown == [[x["name"], str(x["order"]), str(x["free"])]
                                                 for x in c.get("/v1/occupancy").json()["machines"]]

            con.until(machines_as_the_api_says, "the Machines page equal to /v1/occupancy", timeout=30)
            _shot(con, "machines")
            con.go("classes")
            shown = con.page.eval_on_selector_all("tr[data-class]", "els => els.map(e => e.dataset.class)")
            assert shown == [k["name"] for k in c.get("/v1/classes").json()["classes"]] and shown
            _shot(con, "classes")
            con.go("overview")
            assert con.numbers()["up"] == str(c.get("/v1/summary").json()["up"])
    finally:
        con.close()


def test_a_tenant_cancels_its_own_job_and_sees_no_other(browser, ducc):
    m = ducc
    with m.http() as c:
        token = c.post("/v1/tokens", json={"kind": "consumer", "consumer": "/bob"}).json()["token"]
        anns = c.post("/v1/jobs", json={"user": "ann", "memory": 1, "threads": 1, "work": list(range(400)),
                                        "argv": worker(0.2)}).json()["id"]
        with m.http(token) as b:
            bobs = b.post("/v1/jobs", json={"memory": 1, "threads": 1, "work": list(range(400)),
                                            "argv": worker(0.2)}).json()["id"]
        con = Console(browser, m, token)
        try:
            con.go("jobs")
            ids = con.page.eval_on_selector_all("tr[data-job]", "els => els.map(e => +e.dataset.job)")
            assert bobs in ids and anns not in ids
            con.page.click(f"button[data-path='/v1/jobs/{bobs}']")
            con.page.click("#confirm-yes")
            con.until(lambda: con.page.locator(f"tr[data-job='{bobs}'] [data-k=state]").inner_text() == "cancelled",
                      "bob's job shown cancelled", timeout=30)
            assert job(c, bobs)["state"] == "cancelled"
            assert job(c, anns)["state"] not in ("cancelled",)
        finally:
            con.close()
            c.delete(f"/v1/jobs/{anns}")


def test_reservations_and_services_pages(browser, ducc):
    m = ducc
    con = Console(browser, m, m.token)
    try:
        with m.http() as c:
            res = c.post("/v1/reservations", json={"class": "reserve", "memory": 4}).json()["id"]
            svc = c.post("/v1/services", json={"class": "fixed", "memory": 1, "argv": SERVICE}).json()["id"]
            con.go("reservations")
            row = f"tr[data-job='{res}']"
            con.until(lambda: con.page.locator(f"{row} [data-k=state]").inner_text() == "running",
                      "the reservation placed", timeout=30)
            host = c.get(f"/v1/reservations/{res}").json()["host"]
            assert host in con.page.locator(row).inner_text()
            _shot(con, "reservations")
            con.go("services")
            con.until(lambda: con.page.locator(f"tr[data-job='{svc}'] [data-k=processes]").inner_text() == "1",
                      "the service's process shown", timeout=30)
            _shot(con, "services")
            c.delete(f"/v1/reservations/{res}")
            c.delete(f"/v1/services/{svc}")
    finally:
        con.close()
