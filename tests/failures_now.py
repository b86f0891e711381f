"""A pytest plugin (``-p tests.failures_now``, as ``make test`` loads it): each failure's name is
printed the moment it is known, so a run that is stopped early (a timeout, Ctrl-C) still says
what failed. Under xdist the controller hears every worker's reports and prints them; the
workers print nothing."""

from __future__ import annotations

import pytest


class _FailuresNow:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        when = "" if report.when == "call" else f" (in {report.when})"
        line = f"FAILED {report.nodeid}{when}"
        if reporter is None:
            print(line, flush=True)
            return
        if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):  # after the progress dots
            reporter.write("\n")
        reporter.write_line(line, red=True, bold=True)


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(_FailuresNow(config), "failures-now")
