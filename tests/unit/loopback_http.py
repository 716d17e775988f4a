"""An HTTP server on loopback that gives every GET the same answer, over TLS when asked."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def answering_every_get(
    status: int, content_type: str, body: bytes, *, tls: ssl.SSLContext | None = None
) -> Iterator[int]:
    """Serve the answer on a free loopback port, which it yields, until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a client refusing the certificate is what some tests are about

    server = Server(("127.0.0.1", 0), Handler)
    if tls is not None:
        # The handshake happens in the handler's thread, on first read, so that a client that
        # refuses the certificate cannot stall the accept loop.
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
