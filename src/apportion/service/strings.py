"""The one rule for strings the master takes and its store keeps (docs/service.md, "HTTP API").

- **Everywhere**: no NUL byte (it cannot reach exec(), and PostgreSQL's text refuses it while
  SQLite keeps it: the same request would be kept by one store and stop the other) and no lone
  surrogate (not UTF-8: neither store can encode it).
- **Names and one-line texts** (an OS name, a user, a requirement, a consumer path): no control
  character at all (C0, DEL, C1): they mean nothing there and would garble logs and terminals.

Free texts (an argument, an environment value, a work item's error) keep tab, newline, escape:
they mean something there. ``printable`` is for what the master writes of what it was sent
(an audit row's path, a refusal's message): the offending characters escaped, never refused.
"""

from __future__ import annotations

import re

# as request schemas check them (api/schemas.py): pydantic's regex engine matches UTF-8, so a
# string with a lone surrogate fails any pattern (``string_unicode``) before it is matched
TEXT = r"^[^\x00]*$"
LINE = r"^[^\x00-\x1f\x7f-\x9f]*$"
_NOT_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(s: str) -> str:
    """``s`` with every NUL, control character and lone surrogate written as its escape (``\\x00``)."""
    return _NOT_LINE.sub(lambda m: ascii(m.group())[1:-1], s) if _NOT_LINE.search(s) else s
