"""What an agent tells the master about its host: slots, memory, OS and attributes."""

from __future__ import annotations

import math
import platform
import re
from dataclasses import dataclass, field
from typing import Any

import psutil

AttributeValue = str | int | float | bool
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class HostFacts:
    slots: int
    memory: float
    os: str
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    resources: dict[str, Any] | None = None  # the resource vector (resources.py)

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"slots": self.slots, "memory": self.memory, "os": self.os,
                                  "attributes": dict(self.attributes)}
        if self.resources is not None:
            out["resources"] = self.resources
        return out


def gather(slots: int | None = None, memory: float | None = None,
           attributes: dict[str, AttributeValue] | None = None, resources: dict[str, Any] | None = None) -> HostFacts:
    """The host as psutil sees it, with what the operator gave taking precedence."""
    if slots is None:
        slots = psutil.cpu_count(logical=True) or 1
    if memory is None:
        memory = round(psutil.virtual_memory().total / 2**30, 1)
    return HostFacts(slots=slots, memory=memory, os=platform.system(), attributes=dict(attributes or {}),
                     resources=resources)


def parse_value(text: str) -> AttributeValue:
    """`4` -> 4, `2.5` -> 2.5, `true`/`false` -> bool, anything else stays a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def parse_attributes(pairs: list[str]) -> dict[str, AttributeValue]:
    """`KEY=VALUE` pairs as a dict; raises ValueError naming the pair that is not one."""
    out: dict[str, AttributeValue] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{pair!r} is not KEY=VALUE")
        if not _KEY.fullmatch(key):
            raise ValueError(f"{key!r}: a key is a name select() can use (letters, digits, _; not a digit first)")
        out[key] = parse_value(value.strip())
    return out
