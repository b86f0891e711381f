"""What each slot of an allocation needs: ``{"cores", "memory", "gpus", "gpu_model"}``.

``resources_of`` checks a mapping before it is sent (the master checks again, and its 422 names
the field too); ``parse_resources`` reads the command line's form, ``cores=8,memory=64,gpus=0.5``
(``apportion run --resources``, ``apportion bench service --resources``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

NUMBERS = {"cores": 4096.0, "memory": 1_000_000.0, "gpus": 4096.0}  # kind -> the most one slot may ask
TEXT = ("gpu_model",)


def resources_of(resources: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``resources`` as the API takes it; ValueError naming the key that is wrong."""
    if not isinstance(resources, Mapping):
        raise ValueError(f"resources: a mapping of kind to amount, not {type(resources).__name__}")
    out: dict[str, Any] = {}
    for key, value in resources.items():
        if key in NUMBERS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"resources: {key} must be a number, not {value!r}")
            if not 0 <= value <= NUMBERS[key]:
                raise ValueError(f"resources: {key} must be from 0 to {NUMBERS[key]:g}, not {value!r}")
            out[key] = value
        elif key in TEXT:
            if not isinstance(value, str) or not value or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
                raise ValueError(f"resources: {key} must be a non-empty one-line text, not {value!r}")
            out[key] = value
        else:
            raise ValueError(f"resources: unknown kind {key!r} (known: {', '.join([*NUMBERS, *TEXT])})")
    return out


def parse_resources(text: str) -> dict[str, Any]:
    """``cores=8,memory=64,gpus=1,gpu_model=A100`` -> a mapping; ValueError naming what is wrong."""
    out: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, raw = part.partition("=")
        key, raw = key.strip(), raw.strip()
        if not eq or not key or not raw:
            raise ValueError(f"{part!r}: each is KIND=AMOUNT, e.g. cores=8,memory=64,gpus=0.5")
        if key in out:
            raise ValueError(f"{key} given twice")
        if key in NUMBERS:
            try:
                number = float(raw)
            except ValueError:
                raise ValueError(f"{key}={raw}: {raw!r} is not a number") from None
            out[key] = int(number) if number.is_integer() else number
        else:
            out[key] = raw
    if not out:
        raise ValueError("no resources given: KIND=AMOUNT, e.g. cores=8,memory=64,gpus=1")
    return resources_of(out)
