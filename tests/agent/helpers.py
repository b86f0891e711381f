"""Shared by the agent tests: waiting for a condition with a deadline, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(probe: Callable[[], T], timeout: float = 10.0, what: str = "the condition") -> T:
    """Call `probe` until it returns something truthy, and return that; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s (last: {value!r})")
        time.sleep(0.01)
