"""Reading the scalar values of DUCC files: integers, booleans, memory sizes, names.

Each reader takes the text as written and returns the value, or raises
``BadValue`` whose message is the reason a user should read (it ends up in a
``file:line: field: reason`` problem).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_INT = re.compile(r"[+-]?\d+\Z")
_GB = re.compile(r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>gb?|GB?|Gb|gB)?\Z")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)\Z")


class BadValue(ValueError):
    """A value that cannot be read; ``str()`` is the reason."""


def read_int(text: str, *, minimum: int | None = None, what: str = "a whole number") -> int:
    if not _INT.match(text):
        raise BadValue(f"{text!r} is not {what}")
    value = int(text)
    if minimum is not None and value < minimum:
        raise BadValue(f"{value} is below the least allowed value, {minimum}")
    return value


def read_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise BadValue(f"{text!r} is not true or false")


def read_gb(text: str, *, minimum: int = 0) -> int:
    """A memory limit in GB: a whole number, optionally followed by G or GB (``64``, ``64G``)."""
    match = _GB.match(text.strip())
    if match is None:
        raise BadValue(f"{text!r} is not a memory size: write a whole number of GB, like 64 or 64G")
    number = match.group("num")
    if "." in number:
        raise BadValue(f"{text!r} is not a whole number of GB: memory limits are integers")
    value = int(number)
    if value < minimum:
        raise BadValue(f"{value} GB is below the least allowed value, {minimum} GB")
    return value


def read_memory(text: str) -> int | float:
    """A host's memory in GB: a number >= 0, decimals allowed (an int when whole)."""
    match = _GB.match(text.strip())
    if match is None:
        raise BadValue(f"{text!r} is not a memory size in GB, like 31 or 31.5")
    value = float(match.group("num"))
    if value < 0:
        raise BadValue(f"memory {text!r} is negative")
    return int(value) if value.is_integer() else value


def number_memory(value: object) -> int | float:
    """A host's memory given as a YAML/Python number (not a bool), >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadValue(f"{value!r} is not a number of GB")
    if value != value or value in (float("inf"), float("-inf")):
        raise BadValue(f"{value!r} is not a finite number")
    if value < 0:
        raise BadValue(f"memory {value} is negative")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def is_number(text: str) -> bool:
    return bool(_NUMBER.match(text))


def suggest(word: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` when a known word is close to ``word``, else ``""``."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
