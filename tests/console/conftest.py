"""The console's browser tests: Debian's chromium driven by Playwright for Python (which
downloads no browser of its own), one browser per test module, against real masters and
agents started by tests/service/live.py. Without a chromium the tests skip, saying so."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.service.live import Master, reap, wait_until

CHROMIUM = os.environ.get("APPORTION_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 900}


@pytest.fixture(autouse=True, scope="module")
def _reap_processes():
    yield
    reap()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM}: apt-get install chromium (.ci/run installs it), "
                    "or name one in APPORTION_CHROMIUM")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


class Console:
    """One logged-in browser tab on a master's console."""

    def __init__(self, browser: Any, m: Master, token: str) -> None:
        self.m = m
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(m.url + "/ui/")
        self.page.fill("#token", token)
        self.page.click("#login button[type=submit]")
        self.page.wait_for_selector("#nav a", timeout=15_000)

    def go(self, where: str, timeout: float = 15_000) -> Any:
        """Open ``#/where`` and wait until its data is drawn."""
        self.page.evaluate("""w => { document.getElementById('page').dataset.loaded = '';
            if (location.hash === w) window.dispatchEvent(new HashChangeEvent('hashchange'));
            else location.hash = w; }""",
                           "#/" + where)
        self.page.wait_for_function("() => document.getElementById('page').dataset.loaded", timeout=timeout)
        return self.page

    def text(self, selector: str) -> str:
        return self.page.locator(selector).first.inner_text().strip()

    def numbers(self, within: str = "#page") -> dict[str, str]:
        return self.page.eval_on_selector_all(
            f"{within} [data-k]", "els => Object.fromEntries(els.map(e => [e.dataset.k, e.textContent.trim()]))")

    def until(self, check: Any, what: str, timeout: float = 15.0) -> Any:
        """Wait (bounded) for what the page shows, as the live feed redraws it (no reload)."""
        return wait_until(check, timeout, what)

    def close(self) -> None:
        assert not self.errors, f"errors in the page: {self.errors}"
        self.context.close()
