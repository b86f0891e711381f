"""Where the master is and which token to send, from arguments or the environment."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

DEFAULT_MASTER = "http://127.0.0.1:8470"


def master_urls(master: str | Sequence[str] | None) -> list[str]:
    """The master URLs to try, in order.

    From the argument (a URL, a comma-separated list, or a list), else
    ``APPORTION_MASTER`` (likewise), else ``http://127.0.0.1:8470``.
    """
    if master is None:
        master = os.environ.get("APPORTION_MASTER") or DEFAULT_MASTER
    items = master.split(",") if isinstance(master, str) else list(master)
    urls = [u.strip().rstrip("/") for u in items if u.strip()]
    if not urls:
        raise ValueError("no master URL given")
    return urls


def resolve_token(token: str | None, token_file: str | os.PathLike[str] | None = None) -> str | None:
    """The bearer token: the argument, else ``APPORTION_TOKEN``, else the token file.

    The file is the argument, else ``APPORTION_TOKEN_FILE``; its first line is
    the token. No token at all is allowed (the master then answers 401).
    """
    if token:
        return token.strip()
    env = os.environ.get("APPORTION_TOKEN")
    if env and env.strip():
        return env.strip()
    path = token_file or os.environ.get("APPORTION_TOKEN_FILE")
    if path:
        text = Path(path).read_text().strip()
        return text.splitlines()[0].strip() if text else None
    return None
