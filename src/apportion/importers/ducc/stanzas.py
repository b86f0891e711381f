"""The block language of ``ducc.classes`` and ``ducc.users``.

A file is a sequence of blocks::

    Nodepool NAME { KEY = VALUE; ... }
    Class NAME [PARENT] { KEY = VALUE; ... }
    User NAME { KEY = VALUE; ... }

``#`` starts a comment that runs to the end of the line. As in DUCC 2, a
value written after ``=`` runs to the end of its line, or to a ``;`` or the
``}`` that closes the block: its words are joined with single spaces, so
``users = alice bob`` and ``users = alice, bob`` are both a list of two users
(``build`` reads commas as white space). Without ``=`` (apportion's shorthand,
``Class a { policy FAIR_SHARE weight 3 }``) a value is one word, so several
pairs fit on a line. Other line ends mean nothing, and ``;`` is optional.

This module only finds the blocks and their key/value pairs, with the line
of each; what the keys mean is ``apportion.importers.ducc.build``'s business.
Every syntax problem is collected, and parsing goes on after each one so a
file with several mistakes reports all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apportion.importers.ducc.values import suggest
from apportion.plan.errors import Problem

KINDS = ("Nodepool", "Class", "User")
_PUNCT = "{}=;"


@dataclass(frozen=True, slots=True)
class Token:
    text: str
    line: int
    punct: bool = False


@dataclass(frozen=True, slots=True)
class Pair:
    key: str
    value: str
    line: int


@dataclass
class Stanza:
    """One block: ``kind name [parent] { pairs }``."""

    kind: str
    name: str
    file: str
    line: int
    parent: str | None = None
    parent_line: int | None = None
    pairs: dict[str, Pair] = field(default_factory=dict)
    damaged: bool = False  # the block could not be read (its problem is reported); only its name is known

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if ch.isspace():
                i += 1
            elif ch == "#":
                break
            elif ch in _PUNCT:
                tokens.append(Token(ch, lineno, punct=True))
                i += 1
            else:
                j = i
                while j < n and not line[j].isspace() and line[j] not in _PUNCT and line[j] != "#":
                    j += 1
                tokens.append(Token(line[i:j], lineno))
                i = j
    return tokens


class _Parser:
    def __init__(self, text: str, file: str, kinds: tuple[str, ...]) -> None:
        self.toks = tokenize(text)
        self.file = file
        self.kinds = kinds
        self.problems: list[Problem] = []
        self.stanzas: list[Stanza] = []
        self.i = 0

    def problem(self, line: int | None, field_: str, reason: str) -> None:
        self.problems.append(Problem(self.file, line, field_, reason))

    def is_word(self, j: int) -> bool:
        return j < len(self.toks) and not self.toks[j].punct

    def is_kind(self, j: int) -> bool:
        return self.is_word(j) and self.toks[j].text in self.kinds

    def skip_to_next_block(self) -> None:
        while self.i < len(self.toks) and not self.is_kind(self.i):
            self.i += 1

    def expected(self) -> str:
        names = list(self.kinds)
        return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]

    def parse(self) -> None:
        while self.i < len(self.toks):
            tok = self.toks[self.i]
            if not self.is_kind(self.i):
                if tok.punct:
                    self.problem(tok.line, "block", f"unexpected {tok.text!r}: a block starts with "
                                 f"{self.expected()} and a name")
                else:
                    self.problem(tok.line, tok.text, f"unknown block type; expected {self.expected()}"
                                 + suggest(tok.text, self.kinds))
                self.i += 1
                self.skip_to_next_block()
                continue
            self.block()

    def block(self) -> None:
        kind_tok = self.toks[self.i]
        kind = kind_tok.text
        self.i += 1
        if not self.is_word(self.i) or self.is_kind(self.i):
            self.problem(kind_tok.line, kind, f"{kind} has no name (write {kind} NAME {{ ... }})")
            self.skip_to_next_block()
            return
        name_tok = self.toks[self.i]
        self.i += 1
        stanza = Stanza(kind, name_tok.text, self.file, kind_tok.line)
        if self.is_word(self.i) and not self.is_kind(self.i):
            stanza.parent = self.toks[self.i].text
            stanza.parent_line = self.toks[self.i].line
            self.i += 1
        if self.i >= len(self.toks) or self.toks[self.i].text != "{" or not self.toks[self.i].punct:
            line = self.toks[self.i].line if self.i < len(self.toks) else name_tok.line
            found = repr(self.toks[self.i].text) if self.i < len(self.toks) else "the end of the file"
            self.problem(line, stanza.label, f"expected '{{' to open the block, found {found}")
            stanza.damaged = True
            self.stanzas.append(stanza)
            self.skip_to_next_block()
            return
        open_line = self.toks[self.i].line
        self.i += 1
        body_start = self.i
        pairs: list[tuple[int, Pair]] = []  # (token index of the key, pair)
        closed = False
        while self.i < len(self.toks):
            tok = self.toks[self.i]
            if tok.punct and tok.text == "}":
                closed = True
                self.i += 1
                break
            if tok.punct and tok.text == ";":
                self.i += 1
                continue
            if tok.punct and tok.text == "=":
                self.problem(tok.line, stanza.label, "'=' without a key before it")
                self.i += 1
                if self.is_word(self.i) and not self.is_kind(self.i):
                    self.i += 1  # its value
                continue
            if tok.punct and tok.text == "{":
                if self.unclosed(stanza, open_line, body_start, pairs):
                    return
                continue
            key_index = self.i
            self.i += 1
            equals = self.i < len(self.toks) and self.toks[self.i].punct and self.toks[self.i].text == "="
            if equals:
                self.i += 1
            if self.i >= len(self.toks) or self.toks[self.i].punct:
                if self.i < len(self.toks) and self.toks[self.i].text == "{":
                    if self.unclosed(stanza, open_line, body_start, pairs):
                        return
                    continue
                self.problem(tok.line, f"{stanza.label}.{tok.text}", "has no value")
                continue
            words = [self.toks[self.i].text]
            self.i += 1
            if equals:
                words.extend(self.rest_of_line(stanza, tok.text))
            pairs.append((key_index, Pair(tok.text, " ".join(words), tok.line)))
        if not closed:
            self.problem(open_line, stanza.label, f"the block opened at line {open_line} is never closed "
                         "with '}'")
        self.finish(stanza, pairs)

    def rest_of_line(self, stanza: Stanza, key: str) -> list[str]:
        """The words after a value's first one on its line, up to ``;``, ``}`` or a block's
        start. A word followed by ``=`` is the next key: the value should have ended before it."""
        line = self.toks[self.i - 1].line
        words: list[str] = []
        while self.is_word(self.i) and self.toks[self.i].line == line and not self.is_kind(self.i):
            after = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else None
            if after is not None and after.punct and after.text == "=" and after.line == line:
                self.problem(line, f"{stanza.label}.{key}", f"a value runs to the end of its line: end it "
                             f"with ';' before {self.toks[self.i].text} =, or start a new line")
                break
            words.append(self.toks[self.i].text)
            self.i += 1
        return words

    def unclosed(self, stanza: Stanza, open_line: int, body_start: int,
                 pairs: list[tuple[int, Pair]]) -> bool:
        """A '{' inside a block: most likely the block lacks its '}' and a new block starts.

        Returns True when parsing restarted at that new block, False when the
        stray '{' (and the block it opens) was skipped.
        """
        brace = self.toks[self.i]
        restart = None
        for j in range(self.i - 1, body_start - 1, -1):
            if self.is_kind(j):
                restart = j
                break
        if restart is not None:
            self.problem(open_line, stanza.label, f"the block opened at line {open_line} has no '}}' before "
                         f"the {self.toks[restart].text} block at line {self.toks[restart].line}")
            self.finish(stanza, [(k, p) for k, p in pairs if k < restart])
            self.i = restart
            return True
        self.problem(brace.line, stanza.label, "unexpected '{' inside a block (blocks do not nest)")
        depth = 0
        while self.i < len(self.toks):
            tok = self.toks[self.i]
            self.i += 1
            if tok.punct and tok.text == "{":
                depth += 1
            elif tok.punct and tok.text == "}":
                depth -= 1
                if depth == 0:
                    break
        return False

    def finish(self, stanza: Stanza, pairs: list[tuple[int, Pair]]) -> None:
        for _, pair in pairs:
            first = stanza.pairs.get(pair.key)
            if first is not None:
                self.problem(pair.line, f"{stanza.label}.{pair.key}",
                             f"given twice in one block (first at line {first.line})")
                continue
            stanza.pairs[pair.key] = pair
        self.stanzas.append(stanza)


def parse_stanzas(text: str, file: str, kinds: tuple[str, ...] = KINDS) -> tuple[list[Stanza], list[Problem]]:
    """The blocks of ``text`` (only ``kinds`` are allowed) and every syntax problem found."""
    parser = _Parser(text, file, kinds)
    parser.parse()
    return parser.stanzas, parser.problems
