"""Helpers for plan tests: build small scenario files, load them, find the reported problems.

A test marks the line it expects a problem on with ``# <-``; ``expect_problem``
finds that line and checks a problem with that field and line was reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apportion.plan import PlanError, Problem, load_scenario
from tests.plan.texts import marked_line


@pytest.fixture
def write(tmp_path: Path):
    def _write(text: str, name: str = "plan.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return _write


@pytest.fixture
def problems_in(write):
    """Load ``text`` as a scenario that must fail; return its problems."""

    def _problems(text: str, name: str = "plan.yaml", loader=load_scenario) -> list[Problem]:
        path = write(text, name)
        with pytest.raises(PlanError) as info:
            loader(path)
        return info.value.problems

    return _problems


@pytest.fixture
def expect_problem(problems_in):
    """Assert a problem with ``field`` (and ``reason`` in its text) on the ``# <-`` line."""

    def _expect(text: str, field: str, reason: str = "", name: str = "plan.yaml") -> Problem:
        line = marked_line(text)
        problems = problems_in(text, name)
        for problem in problems:
            if problem.field == field and problem.line == line and reason in problem.reason:
                assert str(problem).startswith(f"{problem.file}:{line}: {field}: ")
                return problem
        listing = "\n".join(str(p) for p in problems)
        raise AssertionError(f"no problem {field} at line {line} with {reason!r}; got:\n{listing}")

    return _expect
