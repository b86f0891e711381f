"""What each slot of an allocation needs: ``{"cores", "memory", "gpus", "gpu_model", "custom"}``.

``resources_of`` checks a mapping before it is sent (the master checks again, and its 422 names
the field too); ``parse_resources`` reads the command line's form, ``cores=8,memory=64,gpus=0.5``
(``apportion run --resources``, ``apportion bench service --resources``).

A custom kind that agents report (``apportion agent --resource fpga=2``) is asked for by its
name, ``fpga=1`` or ``{"fpga": 1}``, or under ``custom`` as the HTTP API takes it,
``{"custom": {"fpga": 1}}``; either way it is sent under ``custom``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from apportion.vectornames import CUSTOM_NAME, VECTOR_FIELDS

NUMBERS = {"cores": 4096.0, "memory": 1_000_000.0, "gpus": 4096.0}  # kind -> the most one slot may ask
TEXT = ("gpu_model",)
CUSTOM_MOST = 4096.0  # the most one slot may ask of a custom kind


def _amount(key: str, value: Any, most: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"resources: {key} must be a number, not {value!r}")
    if not 0 <= value <= most:
        raise ValueError(f"resources: {key} must be from 0 to {most:g}, not {value!r}")
    return value


def _custom(name: Any, value: Any, into: dict[str, Any]) -> None:
    if not isinstance(name, str) or not CUSTOM_NAME.fullmatch(name) or name in VECTOR_FIELDS:
        known = ", ".join([*NUMBERS, *TEXT])
        raise ValueError(f"resources: unknown kind {name!r} (known: {known}; a custom kind is a name of letters, "
                         "digits and _ that does not start with a digit, up to 64 characters)")
    if name in into:
        raise ValueError(f"resources: custom kind {name} given twice")
    into[name] = _amount(name, value, CUSTOM_MOST)


def resources_of(resources: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``resources`` as the API takes it; ValueError naming the key that is wrong."""
    if not isinstance(resources, Mapping):
        raise ValueError(f"resources: a mapping of kind to amount, not {type(resources).__name__}")
    out: dict[str, Any] = {}
    custom: dict[str, Any] = {}
    for key, value in resources.items():
        if key in NUMBERS:
            out[key] = _amount(key, value, NUMBERS[key])
        elif key in TEXT:
            if not isinstance(value, str) or not value or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
                raise ValueError(f"resources: {key} must be a non-empty one-line text, not {value!r}")
            out[key] = value
        elif key == "custom":
            if not isinstance(value, Mapping):
                raise ValueError(f"resources: custom must be a mapping of kind to amount, not {type(value).__name__}")
            for name, n in value.items():
                _custom(name, n, custom)
        else:
            _custom(key, value, custom)
    if custom:
        out["custom"] = custom
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
        if key not in TEXT:  # a built-in count or a custom kind
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
