"""Every table the CLI prints goes through ``print_table``: a table never cuts a number.

On a terminal, a table is fitted to its width: text columns wrap (at spaces, folding only a
word longer than the column), number columns (the right-justified ones) keep each figure on
one line (a cell longer than ``_WHOLE_UP_TO`` may wrap between its words, never inside one),
and when even that is too wide the lower-priority columns are left out, with a line that
names them. Nothing is ever shown as
``…``, as a truncated number or as a blank cell.

Into a pipe or a file, a table is plain text at its full width: a title line, a header
line, one line a row, columns two spaces apart, no box and no colour, so that ``grep``,
``awk`` and ``cut`` see every value whole. ``--json`` stays the contract for programs.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

# a text column narrower than this folds a word longer than it; numbers never fold
_FOLD_AT = 16
# a cell of a number column up to this wide is never wrapped; a longer one wraps between words
_WHOLE_UP_TO = 24


def _plain(cell: object) -> str:
    """What a cell shows, without markup or style (a rich Text, a markup string, anything else)."""
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        try:
            return Text.from_markup(cell).plain
        except Exception:  # not valid markup: shown as written
            return cell
    return str(cell)


def _whole(column: Column) -> bool:
    """Is this a column of numbers (right-justified), whose cells must never wrap or fold?"""
    return column.justify == "right"


def _longest_word(text: str) -> int:
    """The longest word of any line, a line's first word with its indent."""
    longest = 0
    for line in text.splitlines():
        words = line.split()
        if words:
            indent = len(line) - len(line.lstrip())
            longest = max(longest, indent + len(words[0]), *(len(w) for w in words))
    return longest


def _needs(column: Column) -> tuple[int, int]:
    """(the narrowest this column may be, its natural width), cell text only (no padding)."""
    cells = [_plain(c) for c in column.cells]
    natural = max([len(line) for c in cells for line in (c.splitlines() or [""])]
                  + [len(line) for line in _plain(column.header).splitlines() or [""]])
    head = _longest_word(_plain(column.header))
    if _whole(column):  # a figure ("1.2 h", "315 / 800 (39.4%)") on one line; a long one wraps between words
        widest = max([0] + [len(line) for c in cells for line in (c.splitlines() or [""])])
        least = max(head, min(widest, _WHOLE_UP_TO), max((_longest_word(c) for c in cells), default=0))
    else:
        least = max(head, min(_FOLD_AT, max((_longest_word(c) for c in cells), default=0)))
    return max(1, least), max(1, natural)


def _overhead(console: Console, table: Table) -> int:
    """Columns of the screen a table takes beyond its cells' text: padding, borders."""
    saved = [(c.width, c.min_width, c.max_width) for c in table.columns]
    try:
        for c in table.columns:
            c.width, c.min_width, c.max_width = 1, None, None
        measured = table.__rich_measure__(console, console.options.update_width(10**6)).maximum
    finally:
        for c, (w, lo, hi) in zip(table.columns, saved, strict=True):
            c.width, c.min_width, c.max_width = w, lo, hi
    return measured - len(table.columns)


def fit(console: Console, table: Table, width: int | None = None, drop_first: Sequence[str] = ()) -> list[str]:
    """Fit ``table`` to ``width`` (default: the console's) in place; -> the headers left out.

    Numbers keep their width; text wraps; columns are left out, those named in ``drop_first``
    first (in that order), then from the right (never the first column), until the rest fits.
    """
    width = width or console.width
    dropped: list[str] = []
    if not table.columns:
        return dropped
    position = {id(c): i + 1 for i, c in enumerate(table.columns)}
    order = [c for h in drop_first for c in table.columns[1:] if _plain(c.header) == h]
    order += [c for c in reversed(table.columns[1:]) if c not in order]
    while True:
        needs = [_needs(c) for c in table.columns]
        room = width - _overhead(console, table)
        if sum(least for least, _ in needs) <= room or not order or len(table.columns) == 1:
            break
        gone = order.pop(0)
        dropped.append(_plain(gone.header) or f"column {position[id(gone)]}")
        table.columns = [c for c in table.columns if c is not gone]
    spare = max(0, room - sum(least for least, _ in needs))
    for column, (least, natural) in zip(table.columns, needs, strict=True):
        give = least
        if not _whole(column):
            give = min(natural, least + spare)
            spare -= give - least
        column.width, column.min_width, column.max_width = give, give, give
        # a number column is at least as wide as its longest word, so no number is ever folded
        column.overflow, column.no_wrap = "fold", False
    if dropped:
        note = (f"[dim]not shown at this width: {escape(', '.join(dropped))} (a wider terminal, a pipe or "
                "--json shows every column)[/]")
        table.caption = note if table.caption is None else f"{table.caption}\n{note}"
        table.caption_justify = "left"
    return dropped


def plain_lines(table: Table) -> list[str]:
    """The table as plain text at its full width: title, header, rows, caption."""
    columns = table.columns
    cells = [[_plain(c).replace("\n", " ") for c in col.cells] for col in columns]
    heads = [_plain(col.header).replace("\n", " ") for col in columns]
    widths = [max([len(h)] + [len(v) for v in col]) for h, col in zip(heads, cells, strict=True)]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if _whole(col) else v.ljust(w)
                 for v, w, col in zip(values, widths, columns, strict=True)]
        return "  ".join(parts).rstrip()

    lines = []
    if table.title is not None:
        lines.append(_plain(table.title))
    if table.show_header:
        lines.append(line(heads))
    for i in range(len(table.rows)):
        lines.append(line([col[i] if i < len(col) else "" for col in cells]))
    if table.caption is not None:
        lines.append(_plain(table.caption))
    return lines


def print_table(console: Console, table: Table, drop_first: Sequence[str] = ()) -> None:
    """Print a table that never cuts a number: fitted on a terminal, plain and full-width elsewhere."""
    if console.is_terminal:
        fit(console, table, drop_first=drop_first)
        console.print(table)
        return
    for text in plain_lines(table):
        console.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)
