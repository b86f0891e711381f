"""``apportion solve --json`` writes exactly what ``json.dumps(obj, indent=1)`` writes."""

from __future__ import annotations

import enum
import json

from hypothesis import given
from hypothesis import strategies as st

from apportion.scenario.json_text import dumps_indented

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
           | st.text())
keys = st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4)
    | st.lists(inner, max_size=3).map(tuple),
    max_leaves=40,
)


@given(documents)
def test_the_same_text_as_json_dumps(doc):
    assert dumps_indented(doc) == json.dumps(doc, indent=1)


def test_a_snapshot_like_document():
    doc = {"snapshots": [{"at": 0.5, "consumers": {"/A": {"held": 3, "groups": {"RG1": {"owned_hosts": []}}}},
                          "requests": {"r1": {"held": 2, "hosts": {"h1": 2}}}, "lost": [], "reclaiming": [],
                          "ended": "horizon", "name": "caf\u00e9 \"x\"\n"}]}
    assert dumps_indented(doc) == json.dumps(doc, indent=1)


class Colour(enum.IntEnum):
    RED = 1


def test_what_it_does_not_know_goes_to_json_dumps():
    assert dumps_indented({"c": Colour.RED}) == json.dumps({"c": Colour.RED}, indent=1)
    loop: list = []
    loop.append(loop)
    try:
        dumps_indented(loop)
    except ValueError as e:
        assert "Circular reference" in str(e)
    else:
        raise AssertionError("a reference cycle must be refused as json.dumps refuses it")
