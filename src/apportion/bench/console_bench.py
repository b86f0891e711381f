"""`apportion bench console`: the operator's console at the service's scale, in Chromium.

The store is filled as ``apportion bench service --scale`` fills it (10,000 hosts written
as reported, 1,000 consumers under 20 parents, 20,000 allocations made through the API),
a real master serves it, and Debian's chromium (through Playwright, which downloads no
browser) opens the console:

- **interactive**: from the start of a navigation to ``/ui/#/PAGE`` in a fresh browser
  context (nothing cached) until the page has drawn its data (the shell's
  ``data-loaded`` mark), for Overview, Consumers and Hosts;
- **bytes**: what that navigation moved over the wire (request and response headers and
  bodies of every request that finished, as Chromium counts them; the live feed's stream
  stays open and is left out: it carries a few hundred bytes a change);
- **update**: on an open page, from the API's answer to a change (the change is committed
  when it answers) until the page shows it: the Overview's allocation count after an
  allocation is made, and the Hosts map's tile after a host is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from apportion.bench.machine import source_revision
from apportion.bench.service_bench import (GROUP, PG_ADMIN, Masters, _fill, _write_hosts, leaves, plan_text, store,
                                           wait_for_state)

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
TARGETS = {"interactive_s": 1.5, "update_s": 1.0, "bytes": 1 << 20}
PAGES = ("overview", "consumers", "hosts")


@dataclass(frozen=True, slots=True)
class ConsoleBenchSpec:
    hosts: int = 10_000
    slots_per_host: int = 16
    consumers: int = 1_000
    parents: int = 20
    allocations: int = 20_000
    repeat: int = 3  # navigations per page, and updates per kind
    chromium: str = "/usr/bin/chromium"
    db: str = "sqlite"
    keep: bool = False

    def __post_init__(self) -> None:
        for name in ("hosts", "slots_per_host", "consumers", "parents", "repeat"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be more than 0")
        if not 0 <= self.allocations <= self.hosts * self.slots_per_host:
            raise ValueError("allocations must be between 0 and the slots of the hosts")


def _navigate(browser: Any, url: str, token: str, page_name: str) -> dict[str, Any]:
    """One navigation in a fresh context: seconds to interactive and bytes moved."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    ctx.add_init_script(f"sessionStorage.setItem('apportion.token', {token!r});")
    page = ctx.new_page()
    finished: list[Any] = []
    page.on("requestfinished", lambda req: finished.append(req))
    try:
        t0 = time.perf_counter()
        page.goto(f"{url}/ui/#/{page_name}")
        page.wait_for_function(f"() => document.getElementById('page').dataset.page === {page_name!r} "
                               "&& document.getElementById('page').dataset.loaded", timeout=60_000, polling=10)
        seconds = time.perf_counter() - t0
        total = 0
        for req in finished:
            s = req.sizes()
            total += sum(max(0, s[k]) for k in ("requestHeadersSize", "requestBodySize", "responseHeadersSize",
                                                 "responseBodySize"))
        return {"seconds": seconds, "bytes": total, "requests": len(finished)}
    finally:
        ctx.close()


def _updates(browser: Any, url: str, token: str, spec: ConsoleBenchSpec, say: Callable[[str], None]
             ) -> dict[str, list[float]]:
    """Seconds from a committed change to the open page showing it."""
    headers = {"Authorization": f"Bearer {token}"}
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    ctx.add_init_script(f"sessionStorage.setItem('apportion.token', {token!r});")
    page = ctx.new_page()
    out: dict[str, list[float]] = {"overview": [], "hosts": []}
    consumer = leaves(spec.consumers, spec.parents)[0]
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
            client = c.post("/v1/clients", json={"name": "console-bench", "consumer": consumer}).json()["id"]
            page.goto(f"{url}/ui/#/overview")
            page.wait_for_function("() => document.getElementById('page').dataset.loaded", timeout=60_000)
            wait_for_state(lambda: page.evaluate("() => document.getElementById('live').className") == "live on",
                           30, "the console's live feed open")
            for _ in range(spec.repeat):
                before = int(page.inner_text("[data-k=allocations]"))
                r = c.post("/v1/allocations", json={"client": client, "consumer": consumer, "group": GROUP,
                                                    "min": 1, "max": 1})
                t0 = time.perf_counter()
                assert r.status_code == 201, r.text
                page.wait_for_function(f"() => document.querySelector('[data-k=allocations]')?.textContent "
                                       f"=== '{before + 1}'", timeout=30_000, polling=5)
                out["overview"].append(time.perf_counter() - t0)
            say(f"overview updates: {', '.join(f'{x * 1000:.0f} ms' for x in out['overview'])}")
            page.evaluate("() => { location.hash = '#/hosts'; }")
            page.wait_for_function("() => document.getElementById('page').dataset.page === 'hosts' "
                                   "&& document.getElementById('page').dataset.loaded", timeout=60_000)
            for i in range(spec.repeat):
                name = f"s{i:05d}"
                r = c.post(f"/v1/hosts/{name}/close")
                t0 = time.perf_counter()
                assert r.status_code == 200, r.text
                page.wait_for_function(f"() => document.querySelector('[data-host={name}]')?.classList"
                                       ".contains('closed')", timeout=30_000, polling=5)
                out["hosts"].append(time.perf_counter() - t0)
                c.post(f"/v1/hosts/{name}/open")
            say(f"hosts updates: {', '.join(f'{x * 1000:.0f} ms' for x in out['hosts'])}")
    finally:
        ctx.close()
    return out


def run(spec: ConsoleBenchSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    if not os.path.exists(spec.chromium):
        raise RuntimeError(f"no chromium at {spec.chromium} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    workdir = Path(tempfile.mkdtemp(prefix="apportion-bench-console-"))
    masters: Masters | None = None
    try:
        with contextlib.ExitStack() as stack:
            db = stack.enter_context(store(spec.db, workdir, PG_ADMIN))
            stack.callback(lambda: masters is not None and masters.stop())
            plan = workdir / "plan.yaml"
            plan.write_text(plan_text(spec.consumers, parents=spec.parents))
            masters = Masters(workdir, db, plan, extra=["--heartbeat", "600"])  # hosts without agents stay up
            say(f"writing {spec.hosts:,} hosts")
            _write_hosts(db, spec.hosts, spec.slots_per_host)
            masters.start(0, timeout=300)
            url, token = masters.urls[0], masters.token
            say(f"{spec.consumers:,} clients and {spec.allocations:,} allocations by the API")
            fill = asyncio.run(_fill(url, token, leaves(spec.consumers, spec.parents), spec.allocations, 1))
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
                wait_for_state(lambda: c.get("/v1/summary").json()["held"] >= spec.allocations, 300,
                               "every allocation granted", every=0.5)
                summary = c.get("/v1/summary").json()
            pages: dict[str, list[dict[str, Any]]] = {p: [] for p in PAGES}
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=spec.chromium, args=CHROMIUM_ARGS, headless=True)
                try:
                    _navigate(browser, url, token, "overview")  # the browser's own first start, not measured
                    for _ in range(spec.repeat):
                        for p in PAGES:
                            pages[p].append(_navigate(browser, url, token, p))
                    for p in PAGES:
                        say(f"{p}: " + ", ".join(f"{x['seconds'] * 1000:.0f} ms / {x['bytes'] / 1024:.0f} KiB"
                                                 for x in pages[p]))
                    updates = _updates(browser, url, token, spec, say)
                finally:
                    browser.close()
            masters.stop()
            figures = {p: {"interactive_median_s": statistics.median(x["seconds"] for x in v),
                           "interactive_max_s": max(x["seconds"] for x in v),
                           "bytes_max": max(x["bytes"] for x in v), "requests": v[0]["requests"]}
                       for p, v in pages.items()}
            upd = {k: {"median_s": statistics.median(v), "max_s": max(v)} for k, v in updates.items()}
            return {
                "spec": asdict(spec), "revision": source_revision(), "fill": fill,
                "summary": {k: summary[k] for k in ("hosts", "up", "slots", "used", "allocations", "held", "demand")},
                "pages": figures, "updates": upd,
                "targets": {
                    "interactive_s": {"target": TARGETS["interactive_s"],
                                      "met": all(f["interactive_max_s"] <= TARGETS["interactive_s"]
                                                 for f in figures.values())},
                    "update_s": {"target": TARGETS["update_s"],
                                 "met": all(u["max_s"] <= TARGETS["update_s"] for u in upd.values())},
                    "bytes": {"target": TARGETS["bytes"],
                              "met": all(f["bytes_max"] <= TARGETS["bytes"] for f in figures.values())},
                },
            }
    finally:
        if masters is not None:
            masters.stop()
        if not spec.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def render(console, machine: dict, r: dict) -> None:  # noqa: ANN001 - a rich Console
    from rich.table import Table
    from apportion.cli.tables import print_table

    from apportion.bench.service_bench import _met, machine_line

    sp, tg = r["spec"], r["targets"]
    console.print(f"[bold]machine[/]: {machine_line(machine)}", highlight=False)
    console.print(f"[bold]cluster[/]: {sp['hosts']:,} hosts x {sp['slots_per_host']} slots, {sp['consumers']:,} "
                  f"consumers, {r['summary']['allocations']:,} allocations ({r['summary']['held']:,} slots held)",
                  highlight=False)
    t = Table(title="apportion bench console (Chromium)")
    for col, j in (("page", "left"), ("interactive, median", "right"), ("max", "right"), ("bytes, max", "right"),
                   ("requests", "right")):
        t.add_column(col, justify=j)
    for p, f in r["pages"].items():
        t.add_row(p, f"{f['interactive_median_s'] * 1000:,.0f} ms", f"{f['interactive_max_s'] * 1000:,.0f} ms",
                  f"{f['bytes_max'] / 1024:,.0f} KiB", str(f["requests"]))
    print_table(console, t)
    u = Table(title="a committed change to the page showing it")
    for col, j in (("page", "left"), ("median", "right"), ("max", "right")):
        u.add_column(col, justify=j)
    for k, v in r["updates"].items():
        u.add_row(k, f"{v['median_s'] * 1000:,.0f} ms", f"{v['max_s'] * 1000:,.0f} ms")
    print_table(console, u)
    console.print(f"targets: interactive <= {tg['interactive_s']['target']} s {_met(tg['interactive_s'])}; "
                  f"update <= {tg['update_s']['target']} s {_met(tg['update_s'])}; "
                  f"bytes <= {tg['bytes']['target'] / (1 << 20):.0f} MiB {_met(tg['bytes'])}", highlight=False)
