"""What a user meets first: `apportion --version`, help texts that read as prose, `apportion.client`
without the server, and a sentence naming the extra to install when a command's part is missing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from apportion.cli.extras import missing_extra, plain_help
from apportion.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "apportion.cli"]


def test_version() -> None:
    from apportion import __version__

    r = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == f"apportion {__version__}\n", r.stdout + r.stderr
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    toml = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{__version__}"' in toml


def test_apportion_client_is_an_attribute_that_does_not_load_the_server() -> None:
    code = ("import sys, apportion\n"
            "c = apportion.client\n"
            "assert c.Client and c is sys.modules['apportion.client']\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'sqlalchemy', 'numpy', "
            "'matplotlib', 'uvicorn') or m.startswith(('apportion.service', 'apportion.engine'))))\n"
            "try:\n    apportion.nothing\nexcept AttributeError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[]", "module 'apportion' has no attribute 'nothing'"]


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from _commands(sub, (*path, name))


def test_every_help_text_is_prose_without_markup_or_broken_lines() -> None:
    """Every command's --help (and the lists of commands in its group's) at 80 columns: no RST
    ``markup``, and no line broken where the docstring's source broke it."""
    root = typer.main.get_command(app)
    seen = 0
    for path, cmd in _commands(root):
        for text in [cmd.help, cmd.short_help, *(getattr(p, "help", None) for p in cmd.params)]:
            if not text:
                continue
            assert "`" not in text, (path, text)
            for paragraph in text.split("\n\n"):
                assert "\n" not in paragraph, (path, paragraph)
        r = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, prog_name="apportion")
        assert r.exit_code == 0, (path, r.output)
        assert "``" not in r.output, (path, r.output)
        seen += 1
    assert seen > 50
    # the command list of `apportion --help`: rg's whole description, its lines filled
    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}, prog_name="apportion")
    rg = re.search(r"│ rg +(.*?)│ \w", r.output, re.S).group(1)
    assert " ".join(w for w in rg.split() if w != "│") == ("A resource group consumer by consumer, with EGO's "
                                                         "columns: OWNED, DESERVED (now), ALLOCATED, "
                                                         "BORROWED, LENT, DEMAND, SHORTFALL. --watch redraws it "
                                                         "in place.")


def test_plain_help() -> None:
    assert plain_help("Redraw ``--watch``\nevery `N` seconds.\n\n  Second\n  paragraph.") == \
        "Redraw --watch every N seconds.\n\nSecond paragraph."


@pytest.mark.parametrize(("module", "argv", "extra"), [
    ("gmpy2", ["solve", "x.yaml"], "engine"),
    ("yaml", ["import", "ego", "d"], "engine"),
    ("sqlalchemy", ["server", "init"], "server"),
    ("pydantic", ["server"], "server"),
    ("psutil", ["agent", "--name", "h"], "agent"),
    ("matplotlib.pyplot", ["simulate", "p", "t"], "simulate"),
    ("numpy", ["--json", "simulate", "p", "t"], "simulate"),
    ("distributed", ["sweep", "g.yaml", "--dask-local", "2"], "dask"),
    ("dask", ["simulate", "p", "t"], "dask"),
])
def test_a_missing_extra_is_named(module: str, argv: list[str], extra: str) -> None:
    message = missing_extra(ModuleNotFoundError(f"No module named '{module}'", name=module), argv)
    assert message is not None and message.endswith(f"pip install 'apportion[{extra}]'"), message
    assert repr(module.split(".")[0]) in message


def test_a_missing_module_no_extra_brings_is_not_hidden() -> None:
    assert missing_extra(ModuleNotFoundError("No module named 'nope'", name="nope"), ["solve"]) is None
