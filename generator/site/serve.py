"""A built site served on 127.0.0.1: by `python -m generator serve`, the browser tests and the page bench."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class SiteServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a page closed mid-download (the search index): nothing to report

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def start(self) -> SiteServer:
        """Serve from a daemon thread; ``shutdown()`` stops it."""
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


def site_server(directory: Path, port: int = 0, quiet: bool = True) -> SiteServer:
    """A server of ``directory`` on 127.0.0.1 (port 0: a free one), not yet serving."""
    handler = _Quiet if quiet else http.server.SimpleHTTPRequestHandler
    return SiteServer(("127.0.0.1", port), functools.partial(handler, directory=str(directory)))
