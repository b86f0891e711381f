"""What the ``apportion`` command needs around click: the extra to install when a command's
optional part is missing, and help texts as plain prose.

``pip install apportion`` gives the SDK (``apportion.client``) and the commands that talk to a
master; the rest comes with extras (pyproject.toml): ``engine`` (solve, validate, plan diff,
import, export), ``agent``, ``server``, ``simulate`` (simulate, sweep), ``dask`` and ``all``.
The CLI imports those parts only inside the commands that use them, so a missing one is a
``ModuleNotFoundError`` raised by the command, which ``missing_extra`` turns into a sentence.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from typer.core import TyperGroup

# a module of an optional dependency -> the extra that brings it
_MODULE_EXTRA = {
    "pydantic": "engine", "yaml": "engine", "pyparsing": "engine", "sortedcontainers": "engine",
    "gmpy2": "engine", "numpy": "engine", "defusedxml": "engine",
    "psutil": "agent",
    "fastapi": "server", "starlette": "server", "uvicorn": "server", "sqlalchemy": "server",
    "alembic": "server", "psycopg": "server", "prometheus_client": "server", "swagger_ui_bundle": "server",
    "matplotlib": "simulate",
    "dask": "dask", "distributed": "dask",
}

# a command -> the extra that makes all of it work (a command not named needs only the base)
_COMMAND_EXTRA = {
    "solve": "engine", "validate": "engine", "plan": "engine", "import": "engine", "export": "engine",
    "agent": "agent", "server": "server", "reconfigure": "server",
    "simulate": "simulate", "sweep": "simulate", "bench": "all",
}


def _command(argv: list[str]) -> str | None:
    """The command named on the command line (the first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def missing_extra(error: ModuleNotFoundError, argv: list[str] | None = None) -> str | None:
    """What to tell the user when a command failed on a missing optional module; None when the
    module is not one an extra brings (then it is a real error, to be raised)."""
    module = (error.name or "").split(".")[0]
    extra = _MODULE_EXTRA.get(module)
    if extra is None:
        return None
    command = _command(sys.argv[1:] if argv is None else argv)
    if command in _COMMAND_EXTRA and not (extra == "dask" and command in ("sweep", "simulate")):
        extra = _COMMAND_EXTRA[command]
    what = f"`apportion {command}`" if command else "this command"
    return (f"{what} needs the Python module {module!r}, which comes with apportion's {extra!r} extra: "
            f"pip install 'apportion[{extra}]'")


_MARKUP = re.compile(r"``([^`]+)``|`([^`]+)`")


def plain_help(text: str | None) -> str | None:
    """A help text as prose: ``--watch`` and `code` shown bare, each paragraph on one line
    (a docstring's line breaks are its source's, not the reader's)."""
    if not text:
        return text
    text = _MARKUP.sub(lambda m: m.group(1) or m.group(2), text)
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def tidy_help(command: Any) -> None:
    """Every help text of a command tree, its options' included, as ``plain_help`` makes it."""
    command.help = plain_help(command.help)
    command.short_help = plain_help(command.short_help)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = plain_help(param.help)
    for sub in (getattr(command, "commands", None) or {}).values():  # a group (typer's own click)
        tidy_help(sub)


class TidyGroup(TyperGroup):
    """The root ``apportion`` group: whenever typer builds the command tree (to run it, to show a
    help), every help text in it is made plain prose (``tidy_help``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tidy_help(self)
