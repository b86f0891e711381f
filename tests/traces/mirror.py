"""A real HTTP server on 127.0.0.1 serving a directory, for the trace fetch tests: it runs in a
thread of the test process, answers 404 for what the directory lacks, and records each path asked."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Quiet(SimpleHTTPRequestHandler):
    asked: list[str]
    label_gz: bool

    def end_headers(self):
        if self.label_gz and self.path.endswith(".gz"):
            # as some web servers are set up: a .gz file announced as gzip-encoded content
            self.send_header("Content-Encoding", "gzip")
        super().end_headers()

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def do_GET(self):  # noqa: N802 - the base class's name
        self.asked.append(self.path)
        super().do_GET()


@contextmanager
def serve(directory: Path, label_gz: bool = False) -> Iterator[tuple[str, list[str]]]:
    """``(base URL, paths asked)`` while a server serves ``directory``; stopped and closed after.
    ``label_gz``: answer .gz files with ``Content-Encoding: gzip``."""
    asked: list[str] = []
    handler = functools.partial(type("Handler", (_Quiet,), {"asked": asked, "label_gz": label_gz}),
                                directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="trace-mirror", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
