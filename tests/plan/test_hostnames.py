import pytest

from apportion.plan import expand_hosts


@pytest.mark.parametrize(
    ("pattern", "names"),
    [
        ("c[01-10]", [f"c{n:02d}" for n in range(1, 11)]),
        ("n[1,3,5-7]", ["n1", "n3", "n5", "n6", "n7"]),
        ("r[1-2]n[1-3]", ["r1n1", "r1n2", "r1n3", "r2n1", "r2n2", "r2n3"]),
        ("login1", ["login1"]),
        ("h[8-11]", ["h8", "h9", "h10", "h11"]),
        ("h[001-003].dc", ["h001.dc", "h002.dc", "h003.dc"]),
        ("x[5]", ["x5"]),
        ("[1-2]x", ["1x", "2x"]),
    ],
)
def test_expansion(pattern: str, names: list[str]) -> None:
    assert expand_hosts(pattern) == names


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("c[10-01]", "backwards"),
        ("c[1-", "never closed"),
        ("c[]", "empty"),
        ("c[a-b]", "neither a number nor a range"),
        ("c]1[", "no matching"),
        ("c[1[2]]", "nest"),
        ("c[1,1]", "twice"),
        ("a,b", "only allowed inside brackets"),
        ("", "non-empty"),
        ("c 1", "spaces"),
        ("c[1-2000000]", "too large"),
    ],
)
def test_malformed_patterns_say_why(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        expand_hosts(pattern)
