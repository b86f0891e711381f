"""The console on a master serving an EGO plan, in Debian's chromium, with real agents
running real processes: each page shows what the API says, follows the master live (no
reload), acts through the same API, and follows the token's scope."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.console.conftest import Console
from tests.service.live import SLEEPER, events, granted, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /Apps, owned: 8, grace: 3}
  - {path: /Apps/batch, grace: 3}
  - {path: /Apps/web, grace: 3}
  - {path: /Research, owned: 4, grace: 3, lend: true}
"""
SHOTS = Path(__file__).parents[2] / "docs" / "console"
AGENTS: list = []  # the ego fixture's agents, h1 to h3 (the last test stops h3's)


@pytest.fixture(scope="module")
def ego(tmp_path_factory):
    w = tmp_path_factory.mktemp("ego")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("APPORTION_HISTORY_SECONDS", "1")  # a sample a second, so the charts have a history here
        m = start_master(w / "m", PLAN)
    agents = [start_agent(m, f"h{i}", w / f"h{i}", slots=4) for i in (1, 2, 3)]
    AGENTS[:] = agents
    try:
        with m.http() as c:
            wait_until(lambda: sum(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]) == 3, 30,
                       "three hosts up")
            tokens = {}
            for path in ("/Apps", "/Research"):
                r = c.post("/v1/tokens", json={"kind": "consumer", "consumer": path})
                assert r.status_code == 201, r.text
                tokens[path] = r.json()["token"]
        yield m, tokens
    finally:
        for a in agents:
            a.kill()
        m.proc.kill()


@pytest.fixture
def admin(browser, ego):
    con = Console(browser, ego[0], ego[0].token)
    yield con
    con.close()


def _client(c, name: str, consumer: str) -> int:
    return c.post("/v1/clients", json={"name": name, "consumer": consumer}).json()["id"]


def _alloc(c, client: int, consumer: str, mx: int) -> int:
    r = c.post("/v1/allocations", json={"client": client, "consumer": consumer, "max": mx})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _shot(con: Console, name: str) -> None:
    if os.environ.get("APPORTION_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        con.page.screenshot(path=str(SHOTS / f"{name}.png"))


def test_pages_show_the_apis_numbers_and_follow_it_live(admin, ego):
    m, _ = ego
    with m.http() as c:
        cl, aid = granted(c, "numbers", "/Apps/batch", 3)
        act = c.post(f"/v1/allocations/{aid}/activities",
                     json={"host": next(iter(c.get(f"/v1/allocations/{aid}").json()["hosts"])),
                           "argv": [*SLEEPER[:2], "print('hello from the console test', flush=True)\n"
                                    "import time\nwhile True: time.sleep(0.05)"]}).json()["id"]
        wait_until(lambda: c.get(f"/v1/activities/{act}").json()["state"] == "running", 20, "running")

        def same(page: str, keys: tuple[str, ...], url: str) -> None:
            def check() -> bool:
                admin.go(page)
                shown = admin.numbers()
                api = c.get(url).json()
                return all(shown.get(k) == str(api[k]) for k in keys) or (shown, api)
            got = wait_until(lambda: check() is True, 15, f"{page} equal to {url}")
            assert got

        same("overview", ("up", "down", "closed", "used", "free", "slots", "allocations", "held", "demand",
                          "shortfall", "reclaims"), "/v1/summary")
        _shot(admin, "overview")
        same("hosts", ("hosts", "up", "closed", "down", "used", "free"), "/v1/hostmap")
        tiles = admin.page.eval_on_selector_all("[data-host]", "els => els.map(e => [e.dataset.host, e.dataset.used])")
        assert tiles == [[h["name"], str(h["used"])] for h in c.get("/v1/hosts").json()["hosts"]]
        _shot(admin, "hosts")

        admin.go("consumers")
        rows = admin.page.eval_on_selector_all("tr[data-consumer]", """els => els.map(e => [e.dataset.consumer,
            e.dataset.group, Object.fromEntries([...e.querySelectorAll('[data-k]')].map(x => [x.dataset.k,
            x.textContent.trim()]))])""")
        api = c.get("/v1/consumers").json()["consumers"]
        assert sorted((r[0], r[1]) for r in rows) == sorted((x["consumer"], x["group"]) for x in api)
        for path, group, shown in rows:
            x = next(x for x in api if x["consumer"] == path and x["group"] == group)
            assert {k: shown[k] for k in ("owned", "deserved", "held", "borrowed", "lent", "demand", "shortfall")} \
                == {k: str(x[k]) for k in ("owned", "deserved", "held", "borrowed", "lent", "demand", "shortfall")}
        _shot(admin, "consumers")

        admin.go(f"activity/{act}")
        admin.until(lambda: "hello from the console test" in admin.text("[data-k=stdout]")
                    or admin.go(f"activity/{act}") and False, "the output tail shown")
        _shot(admin, "activity")

        # live: the Overview follows a new allocation without a reload
        admin.go("overview")
        before = int(admin.numbers()["allocations"])
        marker = admin.page.evaluate("() => { window.__same = 1; return 1; }")
        aid2 = _alloc(c, cl, "/Apps/batch", 1)
        admin.until(lambda: admin.numbers().get("allocations") == str(before + 1), "the Overview redrawn live")
        assert admin.page.evaluate("() => window.__same") == marker, "the page was reloaded"
        admin.go("events")
        c.delete(f"/v1/allocations/{aid2}")
        admin.until(lambda: admin.page.locator("#feed [data-event]").count() > 0, "an event in the live feed")
        _shot(admin, "events")
        admin.go("allocations")
        assert admin.page.locator(f"tr[data-allocation='{aid}'] [data-k=held]").inner_text() == "3"
        _shot(admin, "allocations")
        admin.go("plan")
        assert admin.text("[data-k=plan-text]") == c.get("/v1/plan").json()["text"].strip()
        _shot(admin, "plan")
        c.delete(f"/v1/allocations/{aid}")


def test_closing_a_host_from_the_console(admin, ego):
    m, _ = ego
    admin.go("activities?host=h3")
    assert admin.text("[data-k=host-state]") == "ok"
    admin.page.click("button[data-path='/v1/hosts/h3/close']")
    admin.page.click("#confirm-yes")
    admin.until(lambda: admin.text("[data-k=host-state]") == "closed", "h3 shown closed")
    with m.http() as c:
        h3 = next(h for h in c.get("/v1/hosts").json()["hosts"] if h["name"] == "h3")
        assert h3["closed"] is True and h3["state"] == "closed"
    admin.go("hosts")
    assert "closed" in admin.page.get_attribute("[data-host=h3]", "class")
    admin.go("audit")  # the console's call is in the audit, as the API's own
    calls = admin.page.eval_on_selector_all("tr[data-audit]", "els => els.map(e => e.textContent)")
    assert any("POST /v1/hosts/h3/close" in x for x in calls), calls
    _shot(admin, "audit")
    admin.go("activities?host=h3")
    admin.page.click("button[data-path='/v1/hosts/h3/open']")
    admin.page.click("#confirm-yes")
    admin.until(lambda: admin.text("[data-k=host-state]") == "ok", "h3 shown open again")


def test_a_reclaim_shows_its_countdown_then_the_beneficiarys_grant(admin, ego):
    m, _ = ego
    with m.http() as c:
        web, big = granted(c, "web", "/Apps/web", 12)
        for host, n in c.get(f"/v1/allocations/{big}").json()["hosts"].items():
            for _ in range(n):
                c.post(f"/v1/allocations/{big}/activities", json={"host": host, "argv": SLEEPER})
        research = _client(c, "research", "/Research")
        ask = _alloc(c, research, "/Research", 4)
        admin.go(f"allocation/{big}")
        admin.until(lambda: admin.page.locator("[data-reclaim] [data-deadline]").count() > 0
                    or admin.go(f"allocation/{big}") and False, "the reclaim's countdown")
        left = float(admin.page.get_attribute("[data-reclaim] [data-deadline]", "data-deadline"))
        assert left == c.get(f"/v1/allocations/{big}").json()["reclaiming"][0]["deadline"]
        _shot(admin, "reclaim")
        admin.go(f"allocation/{ask}")
        admin.until(lambda: admin.numbers().get("held") == "4", "the beneficiary's grant shown", timeout=30)
        assert c.get(f"/v1/allocations/{ask}").json()["held"] == 4
        c.delete(f"/v1/clients/{web}")
        c.delete(f"/v1/clients/{research}")


def test_a_consumer_token_sees_only_its_subtree(browser, ego):
    m, tokens = ego
    with m.http() as c:
        mine = _client(c, "mine", "/Research")
        a_mine = _alloc(c, mine, "/Research", 1)
        theirs, a_theirs = granted(c, "theirs", "/Apps/batch", 1)
        host = next(iter(c.get(f"/v1/allocations/{a_theirs}").json()["hosts"]))
        act = c.post(f"/v1/allocations/{a_theirs}/activities", json={"host": host, "argv": SLEEPER}).json()["id"]
    con = Console(browser, m, tokens["/Research"])
    try:
        assert con.text("#who") == "consumer token for /Research"  # the header names the token's consumer
        assert "Plan" not in con.text("#nav") and "Audit" not in con.text("#nav")
        con.go("consumers")
        shown = con.page.eval_on_selector_all("tr[data-consumer]", "els => els.map(e => e.dataset.consumer)")
        assert shown and all(p == "/Research" or p.startswith("/Research/") for p in shown)
        con.go("allocations")
        ids = con.page.eval_on_selector_all("tr[data-allocation]", "els => els.map(e => +e.dataset.allocation)")
        assert a_mine in ids and a_theirs not in ids
        for url in (f"allocation/{a_theirs}", f"activity/{act}"):
            con.go(url)
            assert con.page.get_attribute("[data-refusal]", "data-refusal") == "403"
            assert "Refused (403)" in con.text("[data-refusal]")
        _shot(con, "refused")
        con.go("hosts")  # the tiles of others' work are "other", never their consumer
        owners = con.page.eval_on_selector_all(".legend span", "els => els.map(e => e.textContent)")
        assert "/Apps/batch" not in owners
        con.go(f"host/{host}")  # a host's page: the slots of others' work counted, never named
        assert "/Apps/batch" not in con.text("#page") and "outside this token's scope" in con.text("#page")
        with m.http() as c:
            a_wait = _alloc(c, theirs, "/Apps/batch", 50)  # waits: more than the cluster has
            wait_until(lambda: any(w["id"] == a_wait for w in c.get("/v1/queue").json()["waiting"]), 15,
                       "the admin's queue lists it")
        con.go("queue")
        shown = con.page.eval_on_selector_all("tr[data-waiting]", "els => els.map(e => e.dataset.waiting)")
        assert f"allocation-{a_wait}" not in shown
        with m.http(tokens["/Research"]) as r:
            assert shown == [f"allocation-{w['id']}" for w in r.get("/v1/queue").json()["waiting"]]
    finally:
        con.close()
        with m.http() as c:
            c.delete(f"/v1/clients/{mine}")
            c.delete(f"/v1/clients/{theirs}")


def test_a_tenant_kills_its_own_activity_and_an_admin_applies_a_plan_after_its_diff(browser, admin, ego):
    m, tokens = ego
    with m.http() as c:
        mine, aid = granted(c, "tenant", "/Research", 1)
        host = next(iter(c.get(f"/v1/allocations/{aid}").json()["hosts"]))
        act = c.post(f"/v1/allocations/{aid}/activities", json={"host": host, "argv": SLEEPER}).json()["id"]
        wait_until(lambda: c.get(f"/v1/activities/{act}").json()["state"] == "running", 20, "running")
        con = Console(browser, m, tokens["/Research"])
        try:
            con.go(f"activity/{act}")
            con.page.click(f"button[data-path='/v1/activities/{act}/kill']")
            assert "Kill activity" in con.text("#confirm-text")
            con.page.click("#confirm-no")  # cancelled: nothing happens
            assert c.get(f"/v1/activities/{act}").json()["state"] == "running"
            con.page.click(f"button[data-path='/v1/activities/{act}/kill']")
            con.page.click("#confirm-yes")
            wait_until(lambda: c.get(f"/v1/activities/{act}").json()["state"] in ("killed", "exited"), 20,
                       "the activity stopped")
        finally:
            con.close()
        c.delete(f"/v1/clients/{mine}")

        version = c.get("/v1/plan").json()["version"]
        admin.go("plan")
        assert admin.page.is_disabled("#plan-apply")  # no apply before a diff
        admin.page.fill("#plan-text", PLAN.replace("/Apps/web, grace: 3", "/Apps/web, grace: 5"))
        admin.page.click("#plan-diff")
        admin.page.wait_for_selector("#plan-apply:not([disabled])")
        admin.page.click("#plan-apply")
        assert admin.page.is_visible("#confirm-detail")  # the confirmation shows the diff
        admin.page.click("#confirm-yes")
        wait_until(lambda: c.get("/v1/plan").json()["version"] == version + 1, 20, "the plan applied")
        got = c.get("/v1/plan").json()
        assert "grace: 5" in got["text"] and got["applied_by"] == "admin"
        admin.until(lambda: admin.go("plan") and f"href=\"#/plan?version={version + 1}\"" in admin.page.content(),
                    "the new version listed")


def test_a_plan_being_edited_survives_a_plan_applied_meanwhile(admin, ego):
    """The live feed redraws the Plan page when a plan is applied elsewhere: what the
    administrator typed stays, its preview no longer counts (it was made against the
    old version), and once previewed again it applies as typed."""
    m, _ = ego
    with m.http() as c:
        now = c.get("/v1/plan").json()
        mine = now["text"].replace("/Apps/batch, grace: 3", "/Apps/batch, grace: 4")
        other = now["text"].replace("/Research, owned: 4, grace: 3", "/Research, owned: 4, grace: 6")
        assert mine != now["text"] and other != now["text"]
        admin.go("plan")
        admin.page.fill("#plan-text", mine)
        admin.page.click("#plan-diff")
        admin.page.wait_for_selector("#plan-apply:not([disabled])")
        r = c.put("/v1/plan", content=other, headers={"content-type": "text/plain"})
        assert r.status_code == 200, r.text
        admin.until(lambda: f"version {now['version'] + 1}," in admin.text("#page h1"), "the page redrawn live")
        assert admin.page.input_value("#plan-text") == mine  # the edit is kept
        assert admin.page.is_visible("#plan-draft")
        assert admin.page.is_disabled("#plan-apply")  # previewed against the version before
        admin.page.click("#plan-diff")
        admin.page.wait_for_selector("#plan-apply:not([disabled])")
        admin.page.click("#plan-apply")
        admin.page.click("#confirm-yes")
        wait_until(lambda: c.get("/v1/plan").json()["version"] == now["version"] + 2, 20, "the edit applied")
        assert c.get("/v1/plan").json()["text"] == mine
        admin.until(lambda: admin.page.input_value("#plan-text") == mine
                    and not admin.page.is_visible("#plan-draft"), "the page shows the plan in force, no draft")


def test_a_filter_being_typed_survives_a_live_redraw(admin, ego):
    """The Allocations page redraws as allocations change; a filter typed and not yet
    submitted keeps its text, its focus and its cursor."""
    m, _ = ego
    with m.http() as c:
        admin.go("allocations")
        admin.page.click("#filter [name=consumer]")
        admin.page.keyboard.type("/Rese")
        before = admin.page.evaluate("() => document.getElementById('page').dataset.loaded")
        mine, aid = granted(c, "typing", "/Research", 1)
        try:
            admin.until(lambda: admin.page.evaluate("() => document.getElementById('page').dataset.loaded") != before
                        and admin.page.locator(f"[data-allocation='{aid}']").count() == 1, "the page redrawn live")
            assert admin.page.input_value("#filter [name=consumer]") == "/Rese"
            assert admin.page.evaluate("() => document.activeElement.name") == "consumer"
            admin.page.keyboard.type("arch")  # the cursor is still at the end
            assert admin.page.input_value("#filter [name=consumer]") == "/Research"
            admin.page.keyboard.press("Enter")
            admin.until(lambda: "consumer=%2FResearch" in admin.page.url, "the filter submitted")
        finally:
            c.delete(f"/v1/clients/{mine}")


def test_history_and_the_live_feed_follow_the_tokens_scope(ego):
    import json

    import httpx

    m, tokens = ego
    with m.http() as c:
        got = wait_until(lambda: len(x := c.get("/v1/history", params={"span": "hour"}).json()["samples"]) >= 3
                         and x, 20, "stored samples")
        assert all(s["slots"] == 12 or s["hosts_closed"] for s in got[-2:])
        assert {"demand", "allocations"} <= set(got[-1])
        with m.http(tokens["/Research"]) as r:
            scoped = r.get("/v1/history", params={"span": "day"}).json()["samples"]
            assert scoped and "demand" not in scoped[-1] and "slots" in scoped[-1]
            assert r.get("/v1/history", params={"span": "week"}).status_code == 422
            assert r.get("/v1/plan/versions").status_code == 403

        # the feed gives a consumer token its own subtree's events only, and change notices
        seen: list[dict] = []
        with httpx.Client(base_url=m.url, timeout=30,
                          headers={"Authorization": f"Bearer {tokens['/Research']}"}) as r, \
                r.stream("GET", "/v1/events") as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: hello"
            theirs = _client(c, "feed-theirs", "/Apps/web")
            _alloc(c, theirs, "/Apps/web", 1)
            mine = _client(c, "feed-mine", "/Research")
            aid = _alloc(c, mine, "/Research", 1)
            kinds: set[str] = set()
            for line in lines:
                if line.startswith("data:"):
                    body = json.loads(line[5:])
                    if "kinds" in body:
                        kinds |= set(body["kinds"])
                    else:
                        seen.append(body)
                if kinds and any(e.get("allocation") == aid and e["type"] == "granted" for e in seen):
                    break  # the change notice follows the events of its step
        assert "allocations" in kinds
        owners = {e.get("allocation") for e in seen if "allocation" in e}
        assert owners == {aid}, seen  # nothing of /Apps/web's
        c.delete(f"/v1/clients/{theirs}")
        c.delete(f"/v1/clients/{mine}")


def test_the_assets_are_the_packages_own_and_hold_no_data(ego):
    import httpx

    m, _ = ego
    r = httpx.get(m.url + "/ui", follow_redirects=True)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert "http://" not in r.text and "https://" not in r.text  # no CDN
    for name in ("app.js", "core.js", "pages.js", "kinds.js", "ducc.js", "svg.js", "console.css", "favicon.svg"):
        got = httpx.get(f"{m.url}/ui/{name}")
        assert got.status_code == 200 and "https://" not in got.text, name
    # the favicon is the package's own, linked from the page
    assert '<link rel="icon" type="image/svg+xml" href="/ui/favicon.svg">' in r.text
    icon = httpx.get(f"{m.url}/ui/favicon.svg")
    assert icon.headers["content-type"] == "image/svg+xml" and icon.text.startswith("<svg")
    for bad in ("..%2fpages.py", "pages.py", "nothing.js", "%2e%2e%2f%2e%2e%2fapp.py"):
        assert httpx.get(f"{m.url}/ui/{bad}").status_code == 404, bad
    # the data is behind the token, as everywhere in /v1
    assert httpx.get(m.url + "/v1/summary").status_code == 401
    assert httpx.get(m.url + "/v1/hostmap").status_code == 401
    assert httpx.get(m.url + "/v1/kindmap").status_code == 401


def test_hosts_are_named_searched_tabled_and_each_has_its_page(admin, ego):
    m, _ = ego
    with m.http() as c:
        cl, aid = granted(c, "hostpage", "/Apps/batch", 2)
        host = next(iter(c.get(f"/v1/allocations/{aid}").json()["hosts"]))
        act = c.post(f"/v1/allocations/{aid}/activities", json={"host": host, "argv": SLEEPER}).json()["id"]
        wait_until(lambda: c.get(f"/v1/activities/{act}").json()["state"] == "running", 20, "running")
        try:
            names = [h["name"] for h in c.get("/v1/hosts").json()["hosts"]]
            admin.go("hosts")
            # every tile is labelled with its host's name (big enough tiles at this size)
            labels = admin.page.eval_on_selector_all(".tile[data-host]", """els => els.map(e =>
                [e.dataset.host, (e.querySelector('.name') || {}).textContent])""")
            assert labels == [[n, n] for n in names]
            assert all(admin.page.is_visible(f".tile[data-host='{n}'] .name") for n in names)
            _shot(admin, "hosts-named")

            # the search box: only the hosts whose name has what was typed, as /v1/hostmap?name= says
            admin.page.fill("#hostsearch [name=name]", "H2")
            admin.page.press("#hostsearch [name=name]", "Enter")
            admin.until(lambda: "name=H2" in admin.page.url and admin.page.eval_on_selector_all(
                ".tile[data-host]", "els => els.map(e => e.dataset.host)") == ["h2"], "the search applied")
            assert [t[0] for t in c.get("/v1/hostmap", params={"name": "H2"}).json()["tiles"]] == ["h2"]
            assert admin.numbers()["total"] == "1"

            # the table view: a row per host, its state and use as /v1/hosts says
            admin.go("hosts?view=table")
            rows = admin.page.eval_on_selector_all("tr[data-host-row]", """els => els.map(e => [e.dataset.hostRow,
                e.querySelector('[data-k-state]').dataset.kState, e.children[2].textContent.trim(),
                e.children[3].textContent.trim()])""")
            assert rows == [[h["name"], h["state"], str(h["used"]), str(h["slots"])]
                            for h in c.get("/v1/hosts").json()["hosts"]]
            _shot(admin, "hosts-table")

            # a colour for each host state, in the legend; none is the grey of "other" (out of scope)
            colours = admin.page.eval_on_selector_all(".legend.states [data-legend-state]", """els => els.map(e =>
                [e.dataset.legendState, getComputedStyle(e.querySelector('i')).backgroundColor])""")
            assert [s for s, _ in colours] == ["ok", "closed", "unreachable", "down", "lost"]
            assert len({c_ for _, c_ in colours}) == 5, colours
            assert "rgb(154, 163, 178)" not in {c_ for _, c_ in colours}  # colorOf("other")

            # a host's page: what /v1/hosts says of it, and its activities with their elapsed time
            admin.page.click(f"#hosttable a[data-host-link='{host}']")
            admin.page.wait_for_function(f"() => location.hash === '#/host/{host}' && "
                                         "document.getElementById('page').dataset.loaded")
            admin.until(lambda: admin.page.locator(f"tr[data-activity='{act}']").count() == 1
                        or admin.go(f"host/{host}") and False, "the host's activity listed")

            def same_as_api() -> bool:
                admin.go(f"host/{host}")
                h = next(x for x in c.get("/v1/hosts").json()["hosts"] if x["name"] == host)
                shown = admin.numbers()
                return (shown["host-state"], shown["used"], shown["capacity"], shown["free"]) == \
                    (h["state"], str(h["used"]), str(h["slots"]), str(h["free"]))
            admin.until(same_as_api, "the host page equal to /v1/hosts")
            assert admin.page.locator(f"tr[data-held='{aid}']").count() == 1
            a = c.get(f"/v1/activities/{act}").json()
            since = admin.page.get_attribute(f"tr[data-activity='{act}'] [data-since]", "data-since")
            assert float(since) == a["created_at"]
            first = admin.text(f"tr[data-activity='{act}'] [data-k=elapsed]")
            assert first.endswith(" s") or "min" in first
            admin.until(lambda: admin.text(f"tr[data-activity='{act}'] [data-k=elapsed]") != first,
                        "the elapsed time ticking")
            assert "ago" in admin.text("table.facts")  # the heartbeat's age
            assert "not reported" in admin.text("table.facts")  # load and agent version, which agents do not report
            _shot(admin, "host")
            admin.go("host/nosuchhost")
            assert admin.page.get_attribute("[data-refusal]", "data-refusal") == "404"
        finally:
            c.delete(f"/v1/clients/{cl}")


def test_the_queue_shows_who_waits_since_when_where_and_why(admin, ego):
    m, _ = ego
    with m.http() as c:
        cl = _client(c, "queue", "/Apps/batch")
        big = _alloc(c, cl, "/Apps/batch", 12)  # as much as the cluster has
        wait_until(lambda: c.get(f"/v1/allocations/{big}").json()["held"] >= 8, 20, "/Apps/batch's share held")
        ask = _alloc(c, cl, "/Apps/batch", 5)
        r = c.post("/v1/allocations", json={"client": cl, "consumer": "/Apps/batch", "min": 3, "max": 3})
        assert r.status_code == 201, r.text
        rigid = r.json()["id"]
        try:
            def same() -> bool:
                admin.go("queue")
                shown = admin.page.eval_on_selector_all("tr[data-waiting]", """els => els.map(e => [e.dataset.waiting,
                    e.querySelector('[data-k=position]').textContent,
                    e.querySelector('[data-k=reason]').textContent])""")
                api = c.get("/v1/queue").json()["waiting"]
                return shown == [[f"allocation-{w['id']}", f"{w['position']} of {w['queue_length']}",
                                  w["pending_reason"]] for w in api] and (shown, api)
            shown, api = admin.until(same, "the Queue page equal to /v1/queue")
            ids = [s_[0] for s_ in shown]
            assert ids[-2:] == [f"allocation-{ask}", f"allocation-{rigid}"]  # oldest first
            n = len(ids)  # the order the engine serves /Apps/batch's requests in
            assert [s_[1] for s_ in shown][-2:] == [f"{n - 1} of {n}", f"{n} of {n}"]
            w = api[-1]
            assert f"waiting for its min of 3 slots together: {w['free_in_groups']} free in its groups (all)" \
                in shown[-1][2]
            ahead = "1 earlier request of /Apps/batch is" if n == 2 else f"{n - 1} earlier requests of /Apps/batch are"
            assert f"{ahead} served first (position {n})" in shown[-1][2]
            held = c.get("/v1/consumers").json()["consumers"]
            batch = next(x for x in held if x["consumer"] == "/Apps/batch")
            where = "over" if batch["held"] > batch["deserved"] else "at"
            assert f"/Apps/batch holds {batch['held']}, {where} its consumer's share ({batch['deserved']} deserved " \
                "in all)" in shown[-2][2]
            assert admin.page.locator(f"tr[data-waiting='allocation-{ask}'] [data-since]").count() == 1
            # the allocation's own page says why it waits, as the queue does
            admin.until(lambda: admin.go(f"allocation/{rigid}") and admin.numbers().get("reason")
                        == c.get("/v1/queue", params={"allocation": rigid}).json()["waiting"][0]["pending_reason"],
                        "the allocation's page giving its reason")
            assert c.get("/v1/queue", params={"allocation": big}).json()["total"] <= 1
            assert c.get("/v1/queue", params={"allocation": 0}).status_code == 422
            _shot(admin, "queue")
            # freed slots: the request is served and leaves the queue, live
            c.delete(f"/v1/allocations/{big}")
            admin.until(lambda: admin.page.locator(f"tr[data-waiting='allocation-{ask}']").count() == 0,
                        "the served request gone from the queue", timeout=30)
            assert c.get(f"/v1/allocations/{ask}").json()["held"] == 5
        finally:
            c.delete(f"/v1/clients/{cl}")


def test_events_read_as_sentences_with_a_raw_toggle(admin, ego):
    m, _ = ego
    with m.http() as c:
        admin.go("events")
        cl, aid = granted(c, "sentences", "/Research", 2)
        try:
            host, n = next(iter(c.get(f"/v1/allocations/{aid}").json()["hosts"].items()))
            ev = next(e for e in events(c, cl) if e["type"] == "granted")
            line = f"#feed [data-event='{ev['id']}']"
            admin.until(lambda: admin.page.locator(line).count() == 1, "the grant in the live feed")
            assert f"allocation {aid} was granted {ev['slots']} slot" in admin.text(line)
            assert f"on {ev['host']}" in admin.text(line)
            assert "=" not in admin.text(line)
            assert admin.page.get_attribute(f"{line} a[href^='#/allocation/']", "href") == f"#/allocation/{aid}"
            _shot(admin, "events-sentences")
            admin.page.check("#raw-events")
            assert f"allocation={aid}" in admin.text(line) and f"host={ev['host']}" in admin.text(line)
            admin.page.uncheck("#raw-events")
            assert "was granted" in admin.text(line)
        finally:
            c.delete(f"/v1/clients/{cl}")


def test_a_silent_host_shows_its_state_in_its_own_colour(admin, ego):
    """Last in this module: it stops h3's agent. The host goes unreachable or down (as the
    master's rules say), and every page shows that state in the colour its legend gives it."""
    m, _ = ego
    AGENTS[2].kill()
    with m.http() as c:
        state = wait_until(lambda: (s_ := next(h["state"] for h in c.get("/v1/hosts").json()["hosts"]
                                               if h["name"] == "h3")) != "ok" and s_, 30, "h3 silent")
        admin.go("hosts")
        admin.until(lambda: admin.page.get_attribute(".tile[data-host=h3]", "data-state") == state
                    or admin.go("hosts") and False, f"h3's tile {state}")
        legend = admin.page.evaluate(f"""() => getComputedStyle(document.querySelector(
            '.legend.states [data-legend-state={state}] i')).backgroundColor""")
        style = "name => getComputedStyle(document.querySelector(`.tile[data-host=${name}]`)).borderBottomColor"
        edge, ok_edge = admin.page.evaluate(style, "h3"), admin.page.evaluate(style, "h1")
        assert edge == legend and edge != ok_edge, (edge, legend, ok_edge)
        shown = admin.numbers()
        api = c.get("/v1/hostmap").json()
        assert (shown["down"], shown["unreachable"], shown["up"]) == (str(api["down"]), str(api["unreachable"]),
                                                                      str(api["up"]))
        _shot(admin, "hosts-states")
        admin.go("host/h3")
        assert admin.page.get_attribute("[data-k=host-state]", "data-state") == state
        chip = admin.page.evaluate(
            "() => getComputedStyle(document.querySelector('[data-k=host-state] .chip')).backgroundColor")
        assert chip == legend
