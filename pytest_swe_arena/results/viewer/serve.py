"""``swe-arena view OUT``: the out dir over HTTP on 127.0.0.1, for a browser that would rather not open files.

The viewer needs no server (it works from ``file://``); this is for convenience, and for
browsers or settings that block scripts on local files. Only the loopback interface is bound.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ...naming import VIEWER_DIR
from .build import INDEX_PAGE

#: The pages' own policy, sent as a header too: nothing is loaded from anywhere but the out dir.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "base-uri 'none'; form-action 'none'")


class OutDirHandler(SimpleHTTPRequestHandler):
    """Static files of the out dir, never cached (a rebuilt viewer shows at once), without a request log."""

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(out: Path, port: int, ready: Callable[[str], None]) -> None:
    """Serve ``out`` on 127.0.0.1:``port`` (0: any free port) until interrupted; ``ready`` gets the viewer's URL."""
    handler = functools.partial(OutDirHandler, directory=str(out))
    with ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        ready(f"http://127.0.0.1:{server.server_address[1]}/{VIEWER_DIR}/{INDEX_PAGE}")
        server.serve_forever()
