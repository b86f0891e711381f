"""What each slot needs, as the SDK checks it and the command line writes it
(``resources_of``, ``parse_resources``): each refusal names the kind that is wrong."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apportion.client import parse_resources, resources_of


def test_a_custom_kind_is_sent_under_custom() -> None:
    """A kind agents report with ``--resource NAME=N`` is asked for by its name, as the HTTP API's
    ``custom`` takes it."""
    assert parse_resources("cores=2,fpga=1,licence_x=0.5") == {"cores": 2, "custom": {"fpga": 1, "licence_x": 0.5}}
    assert resources_of({"gpus": 1, "fpga": 2}) == {"gpus": 1, "custom": {"fpga": 2}}
    assert resources_of({"custom": {"fpga": 2}}) == {"custom": {"fpga": 2}}


def test_the_command_line_form() -> None:
    assert parse_resources("cores=8,memory=64,gpus=1,gpu_model=A100") == {
        "cores": 8, "memory": 64, "gpus": 1, "gpu_model": "A100"}
    assert parse_resources(" gpus = 0.5 ,") == {"gpus": 0.5}
    assert isinstance(parse_resources("cores=2")["cores"], int)  # a whole number is sent as one


@pytest.mark.parametrize("text, says", [
    ("", "no resources given"), ("cores", "KIND=AMOUNT"), ("cores=", "KIND=AMOUNT"), ("=3", "KIND=AMOUNT"),
    ("cores=two", "'two' is not a number"), ("cores=1,cores=2", "cores given twice"),
    ("gpus=-1", "gpus must be from 0 to 4096"), ("memory=inf", "memory must be a number"),
    ("2disks=2", "unknown kind '2disks'"), ("gpus=nan", "gpus must be a number"),
    ("slots=2", "unknown kind 'slots'"), ("fpga=5000", "fpga must be from 0 to 4096"), ("custom=1", "custom must be a mapping"),
])
def test_bad_text_names_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_resources(text)


@pytest.mark.parametrize("bad, says", [
    ({"gpus": True}, "gpus must be a number"), ({"cores": "8"}, "cores must be a number"),
    ({"cores": 5000}, "cores must be from 0 to 4096"), ({"gpu_model": ""}, "gpu_model must be"),
    ({"gpu_model": "A100\n"}, "gpu_model must be"), ({"fpga": -1}, "fpga must be from 0 to 4096"),
    ({"fpga-2": 1}, "unknown kind 'fpga-2'"), ({"x" * 65: 1}, "unknown kind"), ({"custom": [1]}, "custom must be a mapping"),
    ({"custom": {"cores": 1}}, "unknown kind 'cores'"), ({"fpga": 1, "custom": {"fpga": 2}}, "fpga given twice"),
    ({"fpga": True}, "fpga must be a number"),
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
