"""EGO resource requirement strings: ``select(linux && maxmem > 500) order(-memory)``.

Users of EGO and LSF already write host selections this way, so plans (for
dynamic resource groups) and requests (for per-request host filters) accept
the same language instead of a new one. A parsed ``Requirement`` is a plain
callable ``Host -> bool``, which is all the engine needs (``HostFilter``);
``sort_hosts`` applies the ``order()`` section.

Grammar (``!`` binds tighter than ``&&``, which binds tighter than ``||``)::

    requirement := section+ | expr            (a bare expr means select(expr))
    section     := "select" "(" expr ")" | "order" "(" key ("," key)* ")"
    key         := ["-" | "+"] NAME            ("-": descending)
    expr        := and ("||" and)*
    and         := not ("&&" not)*
    not         := "!" not | "(" expr ")" | NAME OP literal | NAME
    OP          := "==" | "!=" | "<=" | ">=" | "<" | ">"
    literal     := number | "quoted" | 'quoted' | bare-word

A name resolves to the host attribute of that name, else to a built-in:
``name``, ``slots``, ``memory`` (aliases ``maxmem``, ``mem``). A bare ``X``
is true when X resolves to a truthy value or the host's ``type`` equals X.
A comparison against a name the host lacks is false (``!=`` included).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyparsing as pp

from apportion.engine.model import AttrValue, Host

_MEMORY_ALIASES = ("memory", "maxmem", "mem")
_MISSING = object()


def resolve(host: Host, name: str) -> Any:
    """The value ``name`` has on ``host``: its attribute, else a built-in, else missing.

    Attributes win over built-ins so a site that publishes its own ``maxmem``
    (say in MB) gets its own number back.
    """
    if name in host.attributes:
        return host.attributes[name]
    if name == "name":
        return host.name
    if name == "slots":
        return host.slots
    if name in _MEMORY_ALIASES:
        return host.memory
    return _MISSING


# --- expression tree -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Name:
    """A bare name used as a condition."""

    name: str

    def evaluate(self, host: Host) -> bool:
        value = resolve(host, self.name)
        if value is not _MISSING and value:
            return True
        return host.attributes.get("type") == self.name


_NUMERIC_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Compare:
    """``name OP literal``. Values of different kinds are only ever unequal."""

    name: str
    op: str
    value: AttrValue
    quoted: bool = False  # "true" in quotes is a string, bare true a boolean

    def evaluate(self, host: Host) -> bool:
        actual = resolve(host, self.name)
        if actual is _MISSING:
            return False
        expected: AttrValue = self.value
        if isinstance(actual, bool) and not self.quoted and expected in ("true", "false"):
            expected = expected == "true"
        same_kind = (
            (_is_number(actual) and _is_number(expected))
            or (isinstance(actual, str) and isinstance(expected, str))
            or (isinstance(actual, bool) and isinstance(expected, bool))
        )
        if not same_kind:
            return self.op == "!="
        if isinstance(actual, bool) and self.op not in ("==", "!="):
            return False
        return _NUMERIC_OPS[self.op](actual, expected)


@dataclass(frozen=True, slots=True)
class Not:
    operand: Condition

    def evaluate(self, host: Host) -> bool:
        return not self.operand.evaluate(host)


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Condition, ...]

    def evaluate(self, host: Host) -> bool:
        return all(o.evaluate(host) for o in self.operands)


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Condition, ...]

    def evaluate(self, host: Host) -> bool:
        return any(o.evaluate(host) for o in self.operands)


Condition = Name | Compare | Not | And | Or


@dataclass(frozen=True, slots=True)
class OrderKey:
    name: str
    descending: bool = False


# --- the requirement -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """A parsed requirement: a host filter (``select``) and a host ordering (``order``)."""

    text: str
    condition: Condition | None = None  # None: every host matches
    order: tuple[OrderKey, ...] = field(default=())

    def matches(self, host: Host) -> bool:
        return self.condition is None or self.condition.evaluate(host)

    def __call__(self, host: Host) -> bool:
        return self.matches(host)

    def sort_hosts(self, hosts: list[Host]) -> list[Host]:
        """``hosts`` ordered by the ``order()`` keys; ties keep their given order.

        Hosts lacking a key's value go after those that have it, whichever the
        direction. Numbers sort before strings when a key mixes both.
        """
        result = list(hosts)
        for key in reversed(self.order):  # least significant key first; sort is stable
            present: list[tuple[tuple[int, Any], Host]] = []
            missing: list[Host] = []
            for host in result:
                value = resolve(host, key.name)
                if value is _MISSING:
                    missing.append(host)
                elif _is_number(value) or isinstance(value, bool):
                    present.append(((0, float(value)), host))
                else:
                    present.append(((1, str(value)), host))
            present.sort(key=lambda pair: pair[0], reverse=key.descending)
            result = [host for _, host in present] + missing
        return result

    @property
    def has_select(self) -> bool:
        return self.condition is not None


# --- grammar ---------------------------------------------------------------


def _build_grammar() -> tuple[pp.ParserElement, pp.ParserElement]:
    """Two entry points: a list of sections, or a bare expression (shorthand for select)."""
    name = pp.Regex(r"[A-Za-z_][A-Za-z0-9_.\-]*").set_name("name")
    number = pp.Regex(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?").set_name("number")
    number.set_parse_action(lambda t: [float(t[0]) if any(c in t[0] for c in ".eE") else int(t[0])])
    quoted = (pp.QuotedString('"', esc_char="\\") | pp.QuotedString("'", esc_char="\\")).set_name(
        "quoted string"
    )
    quoted.set_parse_action(lambda t: [("quoted", t[0])])
    word = name.copy().set_name("word")
    literal = (number | quoted | word).set_name("number, quoted string or word")
    comparator = pp.one_of("== != <= >= < >").set_name("comparison operator")

    def make_compare(tokens: pp.ParseResults) -> Compare:
        attr, op, value = tokens[0], tokens[1], tokens[2]
        if isinstance(value, tuple):
            return Compare(attr, op, value[1], quoted=True)
        return Compare(attr, op, value)

    # "-" (instead of "+") stops backtracking: once "&&" or "select(" is read,
    # what must follow is reported at the exact place it is missing.
    comparison = (name + comparator - literal).set_name("comparison")
    comparison.set_parse_action(make_compare)
    bare = name.copy().set_parse_action(lambda t: Name(t[0]))

    lpar = pp.Suppress("(").set_name("'('")
    rpar = pp.Suppress(")").set_name("')'")
    expr = pp.Forward().set_name("condition")
    bang = pp.Regex(r"!(?!=)").suppress()
    negation = pp.Forward().set_name("condition")
    atom = (lpar - expr - rpar) | comparison | bare
    negated = (bang - negation).set_parse_action(lambda t: Not(t[0]))
    negation <<= (negated | atom).set_name("a condition (name, comparison, '!' or '(')")
    conj = negation + pp.ZeroOrMore(pp.Suppress("&&") - negation)
    conj.set_parse_action(lambda t: t[0] if len(t) == 1 else And(tuple(t)))
    disj = conj + pp.ZeroOrMore(pp.Suppress("||") - conj)
    disj.set_parse_action(lambda t: t[0] if len(t) == 1 else Or(tuple(t)))
    expr <<= disj

    select_section = pp.Keyword("select") - lpar - pp.Group(expr) - rpar
    select_section.set_parse_action(lambda t: [("select", t[1][0])])
    key = (pp.Opt(pp.one_of("- +"), default="+") + name).set_name("order key")
    key.set_parse_action(lambda t: OrderKey(t[1], descending=t[0] == "-"))
    order_section = pp.Keyword("order") - lpar - pp.Group(pp.DelimitedList(key)) - rpar
    order_section.set_parse_action(lambda t: [("order", tuple(t[1]))])
    section = (select_section | order_section).set_name("select(...) or order(...)")
    sections = pp.OneOrMore(section) + pp.StringEnd().set_name(
        "select(...), order(...) or the end of the text"
    )
    bare_expr = pp.Group(expr).set_parse_action(lambda t: [("select", t[0][0])])
    bare_expr += pp.StringEnd().set_name("'&&', '||' or the end of the text")
    return sections, bare_expr


_SECTIONS, _BARE = _build_grammar()
_STARTS_WITH_SECTION = re.compile(r"\s*(select|order)\s*\(")


MAX_LENGTH = 10_000  # characters of a requirement
MAX_NESTING = 24  # parentheses inside one another
MAX_NEGATIONS = 32  # '!' in one requirement


def _excerpt(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _check_bounds(text: str) -> None:
    """The parser recurses once per '(' and '!': refuse what would exhaust the stack, with the reason."""
    if len(text) > MAX_LENGTH:
        raise ValueError(f"{_excerpt(text)}: {len(text)} characters is more than the limit of {MAX_LENGTH}")
    depth = deepest = negations = 0
    quote = None
    for i, ch in enumerate(text):
        if quote is not None:
            if ch == quote and text[i - 1] != "\\":
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
        elif ch == "!" and text[i + 1:i + 2] != "=":
            negations += 1
    if deepest > MAX_NESTING:
        raise ValueError(f"{_excerpt(text)}: {deepest} parentheses deep is more than the limit of {MAX_NESTING}")
    if negations > MAX_NEGATIONS:
        raise ValueError(f"{_excerpt(text)}: {negations} negations ('!') is more than the limit of {MAX_NEGATIONS}")


def parse_requirement(text: str) -> Requirement:
    """Parse an EGO requirement string; ValueError says where and what was expected
    (and refuses one nested deeper, or longer, than the bounds above)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty requirement: expected select(...) and/or order(...)")
    _check_bounds(text)
    try:
        grammar = _SECTIONS if _STARTS_WITH_SECTION.match(text) else _BARE
        parsed = grammar.parse_string(text, parse_all=True)
    except pp.ParseBaseException as exc:
        found = f"found {text[exc.loc]!r}" if exc.loc < len(text) else "found the end of the text"
        expected = exc.msg.removeprefix("Expected ").split(", found")[0]
        raise ValueError(
            f"{_excerpt(text)}: at position {exc.loc + 1}: expected {expected}, {found}"
        ) from None
    condition: Condition | None = None
    order: tuple[OrderKey, ...] = ()
    seen: set[str] = set()
    for kind, value in parsed:
        if kind in seen:
            raise ValueError(f"{text!r}: {kind}() given twice")
        seen.add(kind)
        if kind == "select":
            condition = value
        else:
            order = value
    return Requirement(text.strip(), condition, order)
