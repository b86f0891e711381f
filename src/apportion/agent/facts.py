"""What an agent tells the master about its host: slots, memory, OS and attributes."""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass, field

import psutil

AttributeValue = str | int | float | bool


@dataclass(frozen=True)
class HostFacts:
    slots: int
    memory: float
    os: str
    attributes: dict[str, AttributeValue] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        return {"slots": self.slots, "memory": self.memory, "os": self.os, "attributes": dict(self.attributes)}


def gather(slots: int | None = None, memory: float | None = None,
           attributes: dict[str, AttributeValue] | None = None) -> HostFacts:
    """The host as psutil sees it, with what the operator gave taking precedence."""
    if slots is None:
        slots = psutil.cpu_count(logical=True) or 1
    if memory is None:
        memory = round(psutil.virtual_memory().total / 2**30, 1)
    return HostFacts(slots=slots, memory=memory, os=platform.system(), attributes=dict(attributes or {}))


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
        if not sep or not key.strip():
            raise ValueError(f"{pair!r} is not KEY=VALUE")
        out[key.strip()] = parse_value(value.strip())
    return out
