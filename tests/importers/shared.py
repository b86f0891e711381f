"""Where the shared DUCC traces are: ../shared beside the repository, absent in a user's clone."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared"
TRACES = SHARED / "traces" / "ducc"

needs_traces = pytest.mark.skipif(
    not (TRACES / "ducc.classes").is_file(),
    reason=f"{TRACES} is absent: the DUCC traces live in ../shared beside the repository, "
    "which a user's clone does not have",
)
