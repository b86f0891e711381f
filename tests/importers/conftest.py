"""Helpers for the DUCC importer tests: small DUCC directories in tmp_path, and where problems are.

A test marks the line it expects a problem on with ``# <-`` (a comment in
every DUCC file format); ``expect`` checks that a problem with that file,
line and field was reported.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from apportion.importers.ducc import load_ducc
from apportion.plan import PlanError, Problem

MARK = "# <-"


def marked_line(text: str, mark: str = MARK) -> int:
    lines = [i for i, line in enumerate(textwrap.dedent(text).splitlines(), start=1) if mark in line]
    assert len(lines) == 1, f"expected one {mark!r} marker, found {len(lines)}"
    return lines[0]


@pytest.fixture
def ducc_dir(tmp_path: Path):
    """Write ``{name: text}`` into a fresh directory and return it."""

    count = 0

    def _make(files: dict[str, str]) -> Path:
        nonlocal count
        count += 1
        root = tmp_path / ("ducc" if count == 1 else f"ducc{count}")
        root.mkdir()
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return root

    return _make


@pytest.fixture
def problems_of(ducc_dir):
    """Load a DUCC directory that must fail; return every problem."""

    def _problems(files: dict[str, str], **kwargs) -> list[Problem]:
        root = ducc_dir(files)
        with pytest.raises(PlanError) as info:
            load_ducc(root, **kwargs)
        return info.value.problems

    return _problems


@pytest.fixture
def expect(problems_of):
    """Assert a problem in ``file`` on its ``# <-`` line, for ``field``, whose reason contains ``reason``."""

    def _expect(files: dict[str, str], file: str, field: str, reason: str = "", **kwargs) -> Problem:
        line = marked_line(files[file])
        problems = problems_of(files, **kwargs)
        for p in problems:
            if Path(p.file).name == file and p.line == line and p.field == field and reason in p.reason:
                assert str(p) == f"{p.file}:{line}: {field}: {p.reason}"
                return p
        listing = "\n".join(str(p) for p in problems)
        raise AssertionError(f"no problem {file}:{line}: {field}: ...{reason}...; got:\n{listing}")

    return _expect
