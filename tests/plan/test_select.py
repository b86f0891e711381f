import pytest

from apportion.engine.model import Host
from apportion.plan import Requirement, parse_requirement

LINUX = Host("l1", slots=8, memory=64.0, attributes={"type": "linux", "ncpus": 16, "gpu": True, "rack": "r2"})
AIX = Host("a1", slots=2, memory=16.0, attributes={"type": "aix", "ncpus": 4, "gpu": False})
BARE = Host("b1", slots=1)


@pytest.mark.parametrize(
    ("text", "linux", "aix", "bare"),
    [
        ("select(linux)", True, False, False),  # bare word equal to type
        ("select(gpu)", True, False, False),  # truthy attribute
        ("select(!gpu)", False, True, True),
        ("select(type == linux)", True, False, False),
        ("select(type == 'aix')", False, True, False),
        ('select(type != "linux")', False, True, False),  # missing attribute: false, != too
        ("select(ncpus >= 16)", True, False, False),
        ("select(ncpus < 16)", False, True, False),
        ("select(maxmem > 20)", True, False, False),
        ("select(mem <= 16)", False, True, True),
        ("select(memory == 64)", True, False, False),
        ("select(slots > 1)", True, True, False),
        ("select(name == b1)", False, False, True),
        ("select(gpu == true)", True, False, False),
        ("select(gpu == false)", False, True, False),
        ("select(nothing > 1)", False, False, False),
        ("select(ncpus == linux)", False, False, False),  # number vs word: unequal
        ("select(rack > r1)", True, False, False),  # strings by text order
        ("linux || aix", True, True, False),  # no section: a bare select expression
        ("order(slots)", True, True, True),  # no select: everything matches
    ],
)
def test_select_truth(text: str, linux: bool, aix: bool, bare: bool) -> None:
    requirement = parse_requirement(text)
    assert [requirement.matches(LINUX), requirement(AIX), requirement(BARE)] == [linux, aix, bare]


def test_and_binds_tighter_than_or() -> None:
    # a || b && c is a || (b && c): true on AIX through `aix`, even though gpu is false there
    assert parse_requirement("select(aix || linux && gpu)")(AIX)
    assert not parse_requirement("select((aix || linux) && gpu)")(AIX)
    assert parse_requirement("select(linux && gpu || aix)")(AIX)


def test_negation_binds_tightest_and_nests() -> None:
    assert parse_requirement("select(!linux && !gpu)")(AIX)
    assert not parse_requirement("select(!(linux || aix))")(AIX)
    assert parse_requirement("select(!!aix)")(AIX)
    assert parse_requirement("select(ncpus != 16)")(AIX)  # != is not ! followed by =


def test_attribute_wins_over_builtin() -> None:
    host = Host("h", slots=1, memory=2.0, attributes={"maxmem": 4000})
    assert parse_requirement("select(maxmem > 500)")(host)
    assert not parse_requirement("select(memory > 500)")(host)


def test_requirement_keeps_text_and_compares_by_content() -> None:
    requirement = parse_requirement("  select(linux) order(-memory)  ")
    assert requirement.text == "select(linux) order(-memory)"
    assert requirement == parse_requirement("select(linux) order(-memory)")
    assert isinstance(requirement, Requirement)
    hash(requirement)


def test_order_ascending_then_descending_and_stable() -> None:
    hosts = [
        Host("h1", slots=4, memory=8.0),
        Host("h2", slots=2, memory=8.0),
        Host("h3", slots=4, memory=16.0),
        Host("h4", slots=2, memory=8.0),
    ]
    ordered = parse_requirement("order(slots, -memory)").sort_hosts(hosts)
    assert [h.name for h in ordered] == ["h2", "h4", "h3", "h1"]
    # ties keep their given order
    assert [h.name for h in parse_requirement("order(memory)").sort_hosts(hosts)] == ["h1", "h2", "h4", "h3"]
    assert [h.name for h in parse_requirement("order(-memory)").sort_hosts(hosts)] == ["h3", "h1", "h2", "h4"]


def test_order_puts_hosts_without_the_key_last() -> None:
    hosts = [BARE, AIX, LINUX]
    assert [h.name for h in parse_requirement("order(ncpus)").sort_hosts(hosts)] == ["a1", "l1", "b1"]
    assert [h.name for h in parse_requirement("order(-ncpus)").sort_hosts(hosts)] == ["l1", "a1", "b1"]


def test_sections_in_any_order() -> None:
    requirement = parse_requirement("order(-slots) select(slots > 1)")
    assert [h.name for h in requirement.sort_hosts([h for h in (AIX, LINUX, BARE) if requirement(h)])] == ["l1", "a1"]


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("select(linux && )", 17, "a condition"),
        ("select(ncpus > )", 16, "number, quoted string or word"),
        ("select(linux", 13, "')'"),
        ("select(a = 1)", 10, "')'"),
        ("select(a) junk", 11, "select(...), order(...) or the end"),
        ("a b", 3, "'&&', '||' or the end"),
        ("order()", 7, "name"),
    ],
)
def test_parse_errors_give_position_and_expectation(text: str, position: int, expected: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_requirement(text)
    assert f"at position {position}: expected {expected}" in str(info.value)


@pytest.mark.parametrize("text", ["", "   ", "select(a) select(b)", "order(a) order(b)"])
def test_empty_or_repeated_sections_are_errors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_requirement(text)
