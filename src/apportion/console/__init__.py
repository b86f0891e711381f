"""The operator's console: pages at ``/ui`` served by the master (docs/console.md).

Outer layer, beside ``service/api``: ``pages`` serves the static assets (plain HTML, ES
modules and CSS shipped as package data, no build step, no CDN); ``api`` adds the
read-only ``/v1`` views the pages need at scale (a summary, a paged host map, a scoped
live feed, DUCC classes, history), each behind the same bearer tokens and scopes as the
rest of ``/v1``; ``feed`` turns each committed step of the master into a change signal.
``attach`` wires the feed and the history sampler to a master's ``committed`` hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from apportion.service.master import Master


def attach(app: FastAPI, m: Master) -> None:
    """Give the master that just started a live feed and a history sampler (its task calls
    both after every step)."""
    from apportion.console.feed import Feed
    from apportion.service.history import Sampler

    feed = Feed(m)
    m.committed.append(feed.on_commit)
    m.committed.append(Sampler(m, app.state.writer.engine).on_commit)
    app.state.console_feed = feed
