"""Host name ranges: ``c[01-10]``, ``n[1,3,5-7]``, ``r[1-2]n[1-3]``.

Clusters name hosts in numbered runs, and writing a hundred names by hand is
how typos get into plans, so every place a plan names hosts accepts a range
pattern. Zero padding is kept (``c[01-10]`` gives ``c01``..``c10``) because
host names are strings, and ``c1`` is not ``c01``.
"""

from __future__ import annotations

import itertools
import re

MAX_NAMES = 1_000_000
"""A pattern expanding to more names than this is a mistake, not a cluster."""

_ITEM = re.compile(r"(\d+)(?:-(\d+))?\Z")


def _expand_group(body: str, pattern: str) -> list[str]:
    """The names one bracket group stands for, e.g. ``1,3,5-7`` -> 1 3 5 6 7."""
    if not body.strip():
        raise ValueError(f"{pattern!r}: empty brackets []")
    values: list[str] = []
    for item in body.split(","):
        match = _ITEM.match(item)
        if match is None:
            raise ValueError(
                f"{pattern!r}: {item!r} inside brackets is neither a number nor a range like 1-5"
            )
        start_text, end_text = match.group(1), match.group(2)
        if end_text is None:
            values.append(start_text)
            continue
        start, end = int(start_text), int(end_text)
        if end < start:
            raise ValueError(f"{pattern!r}: range {item} runs backwards")
        if end - start >= MAX_NAMES:
            raise ValueError(f"{pattern!r}: range {item} is too large")
        width = len(start_text)  # the first number's width fixes the padding
        values.extend(str(n).zfill(width) for n in range(start, end + 1))
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{pattern!r}: [{body}] gives {value} twice")
        seen.add(value)
    return values


def expand_hosts(pattern: str) -> list[str]:
    """Every host name ``pattern`` stands for, in order; a plain name gives itself.

    Several bracket groups combine as a cartesian product, left to right
    (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2). Raises ValueError with the
    reason for a malformed pattern.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("a host name must be a non-empty string")
    if any(ch.isspace() for ch in pattern):
        raise ValueError(f"{pattern!r}: a host name may not contain spaces")
    parts: list[list[str]] = []
    pos = 0
    while pos < len(pattern):
        open_at = pattern.find("[", pos)
        close_at = pattern.find("]", pos)
        if close_at != -1 and (open_at == -1 or close_at < open_at):
            raise ValueError(f"{pattern!r}: ']' at position {close_at + 1} has no matching '['")
        if open_at == -1:
            parts.append([pattern[pos:]])
            break
        if open_at > pos:
            parts.append([pattern[pos:open_at]])
        close_at = pattern.find("]", open_at)
        if close_at == -1:
            raise ValueError(f"{pattern!r}: '[' at position {open_at + 1} is never closed")
        body = pattern[open_at + 1 : close_at]
        if "[" in body:
            raise ValueError(f"{pattern!r}: brackets may not nest")
        parts.append(_expand_group(body, pattern))
        pos = close_at + 1
    for literal in (p[0] for p in parts if len(p) == 1):
        if "," in literal:
            raise ValueError(f"{pattern!r}: ',' is only allowed inside brackets; list hosts separately")
    total = 1
    for part in parts:
        total *= len(part)
    if total > MAX_NAMES:
        raise ValueError(f"{pattern!r}: expands to {total} names, more than {MAX_NAMES}")
    return ["".join(combo) for combo in itertools.product(*parts)]


def is_pattern(text: str) -> bool:
    """True when ``text`` uses range brackets (so it may stand for many hosts)."""
    return "[" in text or "]" in text
