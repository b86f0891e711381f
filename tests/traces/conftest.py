"""Shared helpers for the trace reader tests: writing small traces, plain or gzip."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

SHARED = Path(__file__).parents[2] / ".." / "shared"
TRACES = SHARED / "traces"

needs_shared = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"needs ../shared/traces beside the repository ({TRACES.resolve()} is absent, as in a user's clone)",
)


def write(path: Path, text: str) -> Path:
    """``text`` to ``path``, gzip when the name ends in .gz."""
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def assert_one_bad_line(path: Path, line: int, field: str, reason: str, kept: list[str] | None = None) -> None:
    """Reading ``path`` stops at ``line`` naming ``field`` with a reason that starts with
    ``reason``; with ``skip_bad=1`` that line is skipped and counted, and the jobs read
    are ``kept`` (when given)."""
    from apportion.traces import BadLine, open_trace

    with pytest.raises(BadLine) as caught:
        list(open_trace(path).jobs())
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), line, field)
    assert caught.value.reason.startswith(reason), caught.value.reason
    trace = open_trace(path, skip_bad=1)
    ids = [j.id for j in trace.jobs()]
    assert trace.skips.skipped == 1 and trace.skips.first[0].line == line
    if kept is not None:
        assert ids == kept
