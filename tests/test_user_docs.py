"""What a user reads speaks of the project only.

Users cannot read the project's internal design notes or its tracker: the README, the docs,
the examples, deploy/ and the package's own text (docstrings, comments, help) cite IBM's and
DUCC's documentation by name, never an internal seed document, an issue number or a session.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# "seed 001", "seeds 002-004", "issue 18", "Issue 18's", "POLICY-NOTES", "session 25"
INTERNAL = re.compile(r"\bseeds? 0\d\d\b|\bseed documents?\b|\bissues? #?\d+\b|POLICY-NOTES|\bsessions? \d+\b",
                      re.IGNORECASE)


def _user_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder, pattern in (("docs", "*.md"), ("examples", "*"), ("deploy", "*"), ("src/apportion", "*")):
        for p in sorted((ROOT / folder).rglob(pattern)):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".png", ".gz", ".pyc"}:
                files.append(p)
    return files


def _internal_references(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []
    return [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
            for n, line in enumerate(text.splitlines(), 1) if INTERNAL.search(line)]


def test_the_pattern_finds_what_it_is_for() -> None:
    for line in ("as seed 001 says", "(seeds 002-004)", "Issue 18's cases", "see POLICY-NOTES 4",
                 "measured in session 25"):
        assert INTERNAL.search(line), line
    for line in ("--seeds 10", "a random seed 7 for the replay", "an issue with the trace", "seed=18"):
        assert not INTERNAL.search(line), line


def test_no_internal_references_where_users_read() -> None:
    files = _user_files()
    assert len(files) > 100, "the scan found too few files to mean anything"
    found = [hit for f in files for hit in _internal_references(f)]
    if found:
        pytest.fail("internal references in what users read (cite IBM's or DUCC's documentation by name):\n"
                    + "\n".join(found[:40]))
