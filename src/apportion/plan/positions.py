"""Reading plan files once, fast, and knowing the line of every key.

Error messages are only useful when they say where to look, but YAML and TOML
loaders return plain dicts with no positions. For YAML we compose the node
tree ourselves with libyaml's C composer where PyYAML has it (every node keeps
its mark) and construct the data from it; for TOML, whose standard library
parser keeps none, a small scanner walks the (already validated) text and
notes where each table, key and array item starts. Both produce a map from key
path, e.g. ``("consumers", 3, "groups", "RG1", "owned")``, to a 1-based line.

A file whose text is JSON (JSON is YAML) is read by the ``json`` module, some
fifty times faster than any YAML composer, and without positions: it keeps its
text, and ``compile_document`` reads it again with positions only when it is
rejected, so that the problems still name their lines.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from apportion.plan.errors import KeyPath, PlanError, Problem, format_field

YAML_SUFFIXES = (".yaml", ".yml")
TOML_SUFFIXES = (".toml",)
_MAX_NODES = 1_000_000  # alias bombs: stop noting positions, the data is nonsense anyway


_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser and composer, when built in

T = TypeVar("T")


@dataclass
class Document:
    """A parsed file: its data, the line of each key path, and non-fatal reading problems.

    ``text`` is kept when the positions were not taken (JSON text): ``with_positions``
    reads it again to take them."""

    source: str
    data: Any
    positions: dict[KeyPath, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    text: str | None = field(default=None, repr=False)

    def with_positions(self) -> Document:
        """The same document with every key's line (itself when it has them). The lines
        come from reading the text as YAML; the data stays what was read."""
        if self.text is None:
            return self
        try:
            positions = parse_yaml(self.text, self.source).positions
        except PlanError:  # JSON that YAML 1.1 cannot read: the same data, without lines
            positions = {}
        return Document(self.source, self.data, positions, self.problems)


def compile_document(document: Document, compile_: Callable[[Document], T]) -> T:
    """``compile_(document)``; when a document read without positions is rejected, it is
    read again with them and compiled again, so that every problem names its line."""
    try:
        return compile_(document)
    except PlanError:
        if document.text is None:
            raise
    return compile_(document.with_positions())


def load_document(path: str | os.PathLike[str]) -> Document:
    """Read and parse a .yaml/.yml/.toml file; PlanError when it cannot be read or parsed."""
    source = os.fspath(path)
    suffix = Path(source).suffix.lower()
    if suffix not in YAML_SUFFIXES + TOML_SUFFIXES:
        reason = f"unknown file type {suffix or '(none)'!r}: use .yaml, .yml or .toml"
        raise PlanError([Problem(source, None, "file", reason)])
    try:
        text = Path(source).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError([Problem(source, None, "file", f"not UTF-8 text ({exc.reason})")]) from None
    except OSError as exc:
        raise PlanError([Problem(source, None, "file", f"cannot read: {exc.strerror or exc}")]) from None
    if suffix in TOML_SUFFIXES:
        return parse_toml(text, source)
    return parse_json(text, source) or parse_yaml(text, source)


# --- JSON --------------------------------------------------------------------


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _DuplicateKey
    return out


def parse_json(text: str, source: str = "<json>") -> Document | None:
    """JSON text read by the ``json`` module, without positions (``Document.with_positions``
    adds them); None when the text is not plain JSON (YAML, or a key given twice, which
    the YAML reader reports with its lines)."""
    start = text.lstrip()[:1]
    if start not in ("{", "["):
        return None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, _DuplicateKey, RecursionError):
        return None
    return Document(source, data, text=text)


# --- YAML ------------------------------------------------------------------


def _yaml_syntax_problem(source: str, exc: yaml.YAMLError) -> Problem:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or "invalid YAML"
        if exc.context:
            reason = f"{reason} ({exc.context}"
            if exc.context_mark is not None and exc.context_mark is not mark:
                reason += f" at line {exc.context_mark.line + 1}"
            reason += ")"
        return Problem(source, mark.line + 1 if mark else None, "yaml", reason)
    return Problem(source, None, "yaml", str(exc))


def parse_yaml(text: str, source: str = "<yaml>") -> Document:
    """Parse YAML text, noting the line of every mapping key and sequence item."""
    try:
        return _compose(_SafeLoader, text, source)
    except yaml.YAMLError as exc:
        if _SafeLoader is yaml.SafeLoader:
            raise PlanError([_yaml_syntax_problem(source, exc)]) from None
    try:  # a syntax error: PyYAML's own parser words it (and places it) as it always has
        return _compose(yaml.SafeLoader, text, source)
    except yaml.YAMLError as exc:
        raise PlanError([_yaml_syntax_problem(source, exc)]) from None


def _compose(loader_class: type, text: str, source: str) -> Document:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        positions: dict[KeyPath, int] = {}
        problems: list[Problem] = []
        if node is not None:
            _YamlWalker(loader, source, positions, problems).walk(node, ())
            data = loader.construct_document(node)
        else:
            data = None
    finally:
        loader.dispose()
    return Document(source, data, positions, problems)


class _YamlWalker:
    """Walks a composed YAML node tree before construction (so merge keys are still visible)."""

    def __init__(
        self, loader: Any, source: str, positions: dict[KeyPath, int], problems: list[Problem]
    ) -> None:
        self.loader = loader
        self.source = source
        self.positions = positions
        self.problems = problems
        self.visited = 0
        self.active: set[int] = set()  # nodes on the current path: recursive aliases

    def walk(self, node: yaml.Node, path: KeyPath) -> None:
        self.visited += 1
        if self.visited > _MAX_NODES or id(node) in self.active:
            return
        self.positions.setdefault(path, node.start_mark.line + 1)
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                self._walk_mapping(node, path)
            elif isinstance(node, yaml.SequenceNode):
                for index, item in enumerate(node.value):
                    self.positions[path + (index,)] = item.start_mark.line + 1
                    self.walk(item, path + (index,))
        finally:
            self.active.discard(id(node))

    def _walk_mapping(self, node: yaml.MappingNode, path: KeyPath) -> None:
        first_line: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.loader.construct_object(key_node)
            try:
                hash(key)
            except TypeError:
                continue
            line = key_node.start_mark.line + 1
            if key in first_line:
                self.problems.append(
                    Problem(
                        self.source,
                        line,
                        format_field(path + (key,)),
                        f"key given twice (first at line {first_line[key]}); only one value may be given",
                    )
                )
                continue
            first_line[key] = line
            self.positions[path + (key,)] = line
            self.walk(value_node, path + (key,))


# --- TOML ------------------------------------------------------------------

_TOML_LOCATION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_TOML_END = re.compile(r"\s*\(at end of document\)\s*$")


def parse_toml(text: str, source: str = "<toml>") -> Document:
    """Parse TOML text with tomllib; positions come from a best-effort scan of the text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line: int | None = None
        match = _TOML_LOCATION.search(message)
        if match:
            line = int(match.group(1))
            message = message[: match.start()]
        elif _TOML_END.search(message):
            line = text.count("\n") + 1
            message = _TOML_END.sub(" at the end of the file", message)
        raise PlanError([Problem(source, line, "toml", message)]) from None
    # a file with nothing but comments is as empty as an empty YAML file
    return Document(source, data or None, toml_positions(text))


def toml_positions(text: str) -> dict[KeyPath, int]:
    """Key path -> line for a valid TOML text; whatever the scan could not place is left out."""
    scanner = _TomlScanner(text)
    try:
        scanner.scan()
    except (IndexError, ValueError):
        pass  # best effort: keep what was found before the surprise
    return scanner.positions


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPED = re.compile(r"\\(.)")
_SCALAR = re.compile(r"[^,\]}\n#]*")


class _TomlScanner:
    """Just enough of TOML to know where things start: headers, keys, strings, arrays, inline tables."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.positions: dict[KeyPath, int] = {}
        self.array_tables: dict[KeyPath, int] = {}  # [[x]] path -> number of elements so far
        self.newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line(self, pos: int | None = None) -> int:
        return bisect.bisect_left(self.newlines, self.pos if pos is None else pos) + 1

    def peek(self, count: int = 1) -> str:
        return self.text[self.pos : self.pos + count]

    def skip_space(self, newlines: bool = False) -> None:
        """Skip blanks and comments (and line breaks when ``newlines``)."""
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.pos += 1
            elif ch == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end == -1 else end
            else:
                return

    def note(self, path: KeyPath, line: int, overwrite: bool = True) -> None:
        if overwrite:
            self.positions[path] = line
        else:
            self.positions.setdefault(path, line)

    def scan(self) -> None:
        table: KeyPath = ()
        while True:
            self.skip_space(newlines=True)
            if self.pos >= len(self.text):
                return
            line = self.line()
            if self.peek(2) == "[[":
                self.pos += 2
                table = self.header(self.key(), line, array=True)
                self.pos = self.text.index("]]", self.pos) + 2
            elif self.peek() == "[":
                self.pos += 1
                table = self.header(self.key(), line, array=False)
                self.pos = self.text.index("]", self.pos) + 1
            else:
                parts = self.key()
                self.note_key(table, parts, line)
                self.skip_space()
                if self.peek() != "=":
                    raise ValueError("expected '='")
                self.pos += 1
                self.skip_space()
                self.value(table + tuple(parts))

    def header(self, parts: list[str], line: int, array: bool) -> KeyPath:
        path: KeyPath = ()
        for number, part in enumerate(parts):
            path += (part,)
            last = number == len(parts) - 1
            if last and array:
                index = self.array_tables.get(path, 0)
                self.array_tables[path] = index + 1
                self.note(path, line, overwrite=False)
                path += (index,)
                self.note(path, line)
            elif path in self.array_tables:
                self.note(path, line, overwrite=False)
                path += (self.array_tables[path] - 1,)  # the latest element of that array
            else:
                self.note(path, line, overwrite=last)
        return path

    def note_key(self, base: KeyPath, parts: list[str], line: int) -> None:
        for end in range(1, len(parts) + 1):
            self.note(base + tuple(parts[:end]), line, overwrite=end == len(parts))

    def key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self.skip_space()
            ch = self.peek()
            if ch == '"':
                parts.append(_ESCAPED.sub(lambda m: m.group(1), self.string('"')))
            elif ch == "'":
                parts.append(self.string("'"))
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if match is None:
                    raise ValueError("expected a key")
                parts.append(match.group(0))
                self.pos = match.end()
            self.skip_space()
            if self.peek() != ".":
                return parts
            self.pos += 1

    def string(self, quote: str) -> str:
        """Skip a one-line string starting at ``self.pos``; return its raw body."""
        start = self.pos + 1
        pos = start
        while self.text[pos] != quote:
            pos += 2 if quote == '"' and self.text[pos] == "\\" else 1
        self.pos = pos + 1
        return self.text[start:pos]

    def value(self, path: KeyPath) -> None:
        three = self.peek(3)
        ch = self.peek()
        if three in ('"""', "'''"):
            self.multiline_string(three)
        elif ch in ('"', "'"):
            self.string(ch)
        elif ch == "[":
            self.array(path)
        elif ch == "{":
            self.inline_table(path)
        else:
            match = _SCALAR.match(self.text, self.pos)
            if match is None or match.end() == self.pos:
                raise ValueError("expected a value")
            self.pos = match.end()

    def multiline_string(self, quotes: str) -> None:
        pos = self.pos + 3
        while not self.text.startswith(quotes, pos):
            pos += 2 if quotes == '"""' and self.text[pos] == "\\" else 1
        pos += 3
        while self.text[pos : pos + 1] == quotes[0]:  # up to two quotes may end the body
            pos += 1
        self.pos = pos

    def array(self, path: KeyPath) -> None:
        self.pos += 1
        index = 0
        while True:
            self.skip_space(newlines=True)
            if self.peek() == "]":
                self.pos += 1
                return
            self.note(path + (index,), self.line())
            self.value(path + (index,))
            self.skip_space(newlines=True)
            if self.peek() == ",":
                self.pos += 1
                index += 1
            elif self.peek() != "]":
                raise ValueError("expected ',' or ']'")

    def inline_table(self, path: KeyPath) -> None:
        self.pos += 1
        while True:
            self.skip_space()
            if self.peek() == "}":
                self.pos += 1
                return
            line = self.line()
            parts = self.key()
            self.note_key(path, parts, line)
            self.skip_space()
            self.pos += 1  # '='
            self.skip_space()
            self.value(path + tuple(parts))
            self.skip_space()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "}":
                raise ValueError("expected ',' or '}'")
