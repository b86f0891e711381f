"""The console's assets at ``/ui``: the page (one HTML file whose ES modules draw every
view, routed by the URL's fragment, e.g. ``/ui#/hosts``), its scripts and its style,
read from this package's ``static`` directory (package data: no build step, no CDN).

The assets hold no data and need no token; every number a page shows comes from ``/v1``
with the token the operator typed, kept in the browser's sessionStorage only.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import RedirectResponse, Response

STATIC = Path(__file__).parent / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# the page runs only its own scripts and talks only to its own master
HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                                      "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}

router = APIRouter(include_in_schema=False)


@cache
def _asset(name: str) -> tuple[bytes, str]:
    path = (STATIC / name).resolve()
    if path.parent != STATIC.resolve() or path.suffix not in TYPES or not path.is_file():
        raise HTTPException(404, f"no console asset {name}")
    return path.read_bytes(), TYPES[path.suffix]


@router.get("/ui")
async def ui_root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=308)


@router.get("/ui/")
async def ui_index() -> Response:
    body, kind = _asset("index.html")
    return Response(body, media_type=kind, headers=HEADERS)


@router.get("/ui/{name}")
async def ui_asset(name: str) -> Response:
    body, kind = _asset(name)
    return Response(body, media_type=kind, headers=HEADERS)
