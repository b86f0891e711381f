"""Where the scheduler should listen so that workers on the agents' hosts reach it."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def scheduler_host_for(masters: Sequence[str]) -> str:
    """The address to listen on: loopback when the master is on this machine's loopback
    (its agents then are too), else the address this machine uses to reach the master,
    which its agents' hosts most likely reach as well."""
    parts = urlsplit(masters[0])
    host = parts.hostname or ""
    if _is_loopback(host):
        return LOOPBACK
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host, port))  # UDP: no packet is sent, the kernel just picks the route
            return str(s.getsockname()[0])
    except OSError:
        return socket.gethostbyname(socket.gethostname())
