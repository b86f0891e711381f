"""What each slot needs, as the SDK checks it and the command line writes it
(``resources_of``, ``parse_resources``): each refusal names the kind that is wrong."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apportion.client import parse_resources, resources_of


def test_the_command_line_form() -> None:
    assert parse_resources("cores=8,memory=64,gpus=1,gpu_model=A100") == {
        "cores": 8, "memory": 64, "gpus": 1, "gpu_model": "A100"}
    assert parse_resources(" gpus = 0.5 ,") == {"gpus": 0.5}
    assert isinstance(parse_resources("cores=2")["cores"], int)  # a whole number is sent as one


@pytest.mark.parametrize("text, says", [
    ("", "no resources given"), ("cores", "KIND=AMOUNT"), ("cores=", "KIND=AMOUNT"), ("=3", "KIND=AMOUNT"),
    ("cores=two", "'two' is not a number"), ("cores=1,cores=2", "cores given twice"),
    ("gpus=-1", "gpus must be from 0 to 4096"), ("memory=inf", "memory must be a number"),
    ("disks=2", "unknown kind 'disks'"), ("gpus=nan", "gpus must be a number"),
])
def test_bad_text_names_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_resources(text)


@pytest.mark.parametrize("bad, says", [
    ({"gpus": True}, "gpus must be a number"), ({"cores": "8"}, "cores must be a number"),
    ({"cores": 5000}, "cores must be from 0 to 4096"), ({"gpu_model": ""}, "gpu_model must be"),
    ({"gpu_model": "A100\n"}, "gpu_model must be"), ({"fpga": 1}, "unknown kind 'fpga'"),
])
def test_bad_mappings_are_refused_before_they_are_sent(bad: dict, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        resources_of(bad)
    with pytest.raises(ValueError, match="a mapping"):
        resources_of([("gpus", 1)])  # type: ignore[arg-type]


amounts = st.floats(min_value=0, max_value=4096, allow_nan=False, allow_infinity=False)


@given(st.dictionaries(st.sampled_from(["cores", "memory", "gpus"]), amounts, min_size=1))
def test_text_and_mapping_agree(need: dict[str, float]) -> None:
    text = ",".join(f"{k}={v!r}" for k, v in need.items())
    got = parse_resources(text)
    assert got.keys() == need.keys()
    assert all(math.isclose(got[k], v) for k, v in need.items())
    assert resources_of(got) == got
