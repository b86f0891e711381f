"""A host's slots as an expression over its resources, as EGO's slot definitions allow
(``slots: "min(cores, memory / 4)"``).

A small parser of its own, never ``eval``: names of resource kinds, numbers, ``+ - * /``,
unary minus, parentheses, and the functions ``min``, ``max`` and ``floor``. The value is
rounded down to whole slots.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?|\.\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*/(),]))")
_FUNCTIONS: dict[str, Callable[..., float]] = {"min": min, "max": max, "floor": math.floor}

Expr = Callable[[Mapping[str, float]], float]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"unexpected {text[pos:].strip()[:10]!r} at position {pos + 1} of {self.text!r}")
            kind = m.lastgroup
            assert kind is not None
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.names: set[str] = set()

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, op: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ValueError(f"{self.text!r} ends too early" + (f" (expected {op!r})" if op else ""))
        if op is not None and tok != ("op", op):
            raise ValueError(f"expected {op!r} in {self.text!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def expression(self) -> Expr:
        left = self.term()
        while (tok := self.peek()) in (("op", "+"), ("op", "-")):
            self.take()
            right = self.term()
            left = (lambda a, b: lambda v: a(v) + b(v))(left, right) if tok[1] == "+" else \
                (lambda a, b: lambda v: a(v) - b(v))(left, right)
        return left

    def term(self) -> Expr:
        left = self.unary()
        while (tok := self.peek()) in (("op", "*"), ("op", "/")):
            self.take()
            right = self.unary()
            left = (lambda a, b: lambda v: a(v) * b(v))(left, right) if tok[1] == "*" else \
                (lambda a, b: lambda v: _divide(a(v), b(v)))(left, right)
        return left

    def unary(self) -> Expr:
        if self.peek() == ("op", "-"):
            self.take()
            inner = self.unary()
            return lambda v: -inner(v)
        return self.atom()

    def atom(self) -> Expr:
        kind, text = self.take()
        if kind == "num":
            value = float(text)
            return lambda v: value
        if kind == "name":
            if self.peek() == ("op", "("):
                if text not in _FUNCTIONS:
                    raise ValueError(f"unknown function {text!r} in {self.text!r} (known: min, max, floor)")
                return self.call(text)
            self.names.add(text)
            return lambda v: v.get(text, 0.0)
        if text == "(":
            inner = self.expression()
            self.take(")")
            return inner
        raise ValueError(f"unexpected {text!r} in {self.text!r}")

    def call(self, name: str) -> Expr:
        self.take("(")
        args = [self.expression()]
        while self.peek() == ("op", ","):
            self.take()
            args.append(self.expression())
        self.take(")")
        fn = _FUNCTIONS[name]
        if name == "floor" and len(args) != 1:
            raise ValueError(f"floor takes one argument in {self.text!r}")
        return lambda v: fn(*(a(v) for a in args))


def _divide(a: float, b: float) -> float:
    if b == 0:
        raise ValueError("division by zero")
    return a / b


def parse(text: str) -> tuple[Expr, frozenset[str]]:
    """The expression as a function of a resource mapping, and the names it reads."""
    p = _Parser(text)
    if not p.tokens:
        raise ValueError("an empty expression")
    expr = p.expression()
    if p.peek() is not None:
        raise ValueError(f"unexpected {p.peek()[1]!r} in {text!r}")  # type: ignore[index]
    return expr, frozenset(p.names)


def slots_of(text: str, resources: Mapping[str, float]) -> int:
    """Whole slots the expression gives for ``resources``; ValueError naming the problem (an
    unknown kind, a negative value, a bad expression)."""
    expr, names = parse(text)
    unknown = sorted(names - set(resources))
    if unknown:
        raise ValueError(f"{', '.join(unknown)} not among the host's resources ({', '.join(sorted(resources)) or 'none'})")
    value = expr(resources)
    if value < 0:
        raise ValueError(f"{text!r} gives {value:g} slots, below 0")
    return int(math.floor(value + 1e-9))
