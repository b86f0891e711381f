"""The ``ducc.rm.*`` properties: defaults, ``ducc.properties`` files, and overrides.

Values are read in this order, each source overriding the one before:
DUCC's shipped defaults (``DuccProperties()``), ``ducc.properties``,
``site.ducc.properties``, then the overrides given to ``load_ducc`` (a
scenario's ``ducc: {properties: ...}``).

Properties files are Java properties (``key = value``, ``key: value`` or
``key value``; ``#`` and ``!`` comments). Only the keys in
``PROPERTY_KEYS`` are read; every other key is DUCC's business and ignored.
Overrides are stricter: an unknown key there is a mistake and reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from apportion.engine.ducc.config import PROPERTY_KEYS, DuccProperties
from apportion.importers.ducc.values import BadValue, read_bool, read_gb, read_int, suggest
from apportion.plan.errors import KeyPath, Positions, Problem, Reporter

_BOOL_KEYS = {"ducc.rm.expand.by.doubling", "ducc.rm.prediction"}
_MINIMUM = {
    "ducc.rm.share.quantum": 1,
    "ducc.rm.fragmentation.threshold": 0,
    "ducc.rm.initialization.cap": 0,
    "ducc.rm.prediction.fudge": 0,
    "ducc.rm.node.stability": 1,
    "ducc.rm.global_allotment": 0,
}
_GB_KEYS = {"ducc.rm.share.quantum", "ducc.rm.global_allotment"}


def read_property_text(key: str, text: str) -> int | bool | None:
    """A property value written as text (in a properties file, or as a YAML string)."""
    text = text.strip()
    if "${" in text:
        raise BadValue(f"{text!r}: ${{...}} substitution is not supported here; write the value")
    if key in _BOOL_KEYS:
        return read_bool(text)
    if key == "ducc.rm.global_allotment" and text.lower() in ("", "unlimited", "none"):
        return None
    if key in _GB_KEYS:
        return read_gb(text, minimum=_MINIMUM[key])
    return read_int(text, minimum=_MINIMUM[key])


def read_property_value(key: str, value: Any) -> int | bool | None:
    """A property value from YAML/TOML/Python: a bool, an int, a string, or None (global_allotment)."""
    if isinstance(value, str):
        return read_property_text(key, value)
    if key in _BOOL_KEYS:
        if not isinstance(value, bool):
            raise BadValue(f"{value!r} is not true or false")
        return value
    if value is None and key == "ducc.rm.global_allotment":
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and key in _GB_KEYS:
            raise BadValue(f"{value!r} is not a whole number of GB: memory limits are integers")
        raise BadValue(f"{value!r} is not a whole number")
    if value < _MINIMUM[key]:
        raise BadValue(f"{value} is below the least allowed value, {_MINIMUM[key]}")
    return value


def parse_properties_file(path: Path, problems: list[Problem]) -> dict[str, int | bool | None]:
    """The known ``ducc.rm.*`` keys of a Java properties file (last one wins, as in Java)."""
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(label, None, "file", f"cannot read: {getattr(exc, 'strerror', None) or exc}"))
        return {}
    found: dict[str, int | bool | None] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, value = _split_property(line)
        if key not in PROPERTY_KEYS:
            continue
        try:
            found[key] = read_property_text(key, value)
        except BadValue as exc:
            problems.append(Problem(label, lineno, key, str(exc)))
    return found


def _split_property(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=:":
            return line[:i].strip(), line[i + 1:]
        if ch.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i], rest
    return line, ""


def apply_overrides(
    props: DuccProperties,
    overrides: Mapping[str, Any] | None,
    reporter: Reporter,
    path: KeyPath = (),
) -> DuccProperties:
    """``props`` with the overrides applied; unknown keys and bad values go to ``reporter``."""
    if not overrides:
        return props
    if not isinstance(overrides, Mapping):
        reporter.add(path, f"expected a mapping of ducc.rm.* keys to values, got {type(overrides).__name__}")
        return props
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in PROPERTY_KEYS:
            reporter.add(path + (str(key),), "unknown DUCC property; known: " + ", ".join(PROPERTY_KEYS)
                         + suggest(str(key), PROPERTY_KEYS))
            continue
        try:
            changes[PROPERTY_KEYS[key]] = read_property_value(key, value)
        except BadValue as exc:
            reporter.add(path + (key,), str(exc))
    return dataclasses.replace(props, **changes)


def load_properties(
    files: list[Path],
    overrides: Mapping[str, Any] | None,
    problems: list[Problem],
    *,
    source: str = "<properties>",
    positions: Positions | None = None,
    path: KeyPath = (),
) -> DuccProperties:
    """Defaults, then each file in turn, then ``overrides``."""
    props = DuccProperties()
    for file in files:
        found = parse_properties_file(file, problems)
        props = dataclasses.replace(props, **{PROPERTY_KEYS[k]: v for k, v in found.items()})
    reporter = Reporter(source, positions)
    props = apply_overrides(props, overrides, reporter, path)
    problems.extend(reporter.problems)
    return props
