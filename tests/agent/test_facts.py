"""Host facts and attribute parsing."""

from __future__ import annotations

import platform

import pytest

from apportion.agent.facts import gather, parse_attributes, parse_value


@pytest.mark.parametrize("text, value", [("4", 4), ("-2", -2), ("2.5", 2.5), ("true", True), ("False", False),
                                         ("r1", "r1"), ("nan", "nan"), ("inf", "inf"), ("", "")])
def test_values_read_as_what_they_look_like(text: str, value: object) -> None:
    got = parse_value(text)
    assert got == value and type(got) is type(value)


def test_attributes() -> None:
    assert parse_attributes(["rack=r1", "gpus=2", " zone = a=b "]) == {"rack": "r1", "gpus": 2, "zone": "a=b"}
    for bad in ("novalue", "=x", "my-key=1", "9a=1"):
        with pytest.raises(ValueError, match=bad.split("=")[0] or "="):
            parse_attributes([bad])


def test_gather() -> None:
    f = gather()
    assert f.slots >= 1 and f.memory > 0 and f.os == platform.system() and f.attributes == {}
    g = gather(slots=8, memory=1.5, attributes={"a": 1})
    assert g.as_json() == {"slots": 8, "memory": 1.5, "os": platform.system(), "attributes": {"a": 1}}
