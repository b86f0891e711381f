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
