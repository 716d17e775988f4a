"""
Answers a hostile guest gives on execd's port, served from loopback by the tests and, copied
into a sandbox, by the guest itself: a compression bomb, and an answer dripped a byte a second.

Standard library only, so that the guest's Python runs it as it is (``python3 - PORT MODE``).
"""

from __future__ import annotations

import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MIB = 1024 * 1024
# What the bomb inflates to: a gigabyte, which a reader that inflates it cannot miss.
BOMB_INFLATED = 1024 * MIB
# What every dripped answer says, one byte a second: a running command's status.
DRIPPED = b'{"running": true, "started_at": "2026-01-01T00:00:00Z"}'


def compression_bomb(inflated: int = BOMB_INFLATED) -> bytes:
    """``inflated`` bytes of zeros as gzip: about a thousandth of that on the wire."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * MIB
    return b"".join(packer.compress(zeros) for _ in range(inflated // MIB)) + packer.flush()


def handler(mode: str) -> type[BaseHTTPRequestHandler]:
    """Answers every request in ``mode``: ``bomb`` or ``drip``."""
    bomb = compression_bomb() if mode == "bomb" else b""

    class Hostile(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._answer()

        def do_POST(self) -> None:  # noqa: N802
            self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if mode == "bomb":
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(bomb)))
                self.end_headers()
                self.wfile.write(bomb)
                return
            self.send_header("Content-Length", str(len(DRIPPED)))
            self.end_headers()
            for byte in DRIPPED:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(1)

        def log_message(self, *args: object) -> None:
            pass

    return Hostile


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gives up on the answer is the point


def serve(
    mode: str,
    port: int = 0,
    host: str = "127.0.0.1",
    answers: type[BaseHTTPRequestHandler] | None = None,
) -> ThreadingHTTPServer:
    """
    A server answering in ``mode`` (or as ``answers``, a handler of its own) on a thread of its
    own; its port is ``server_address[1]``.
    """
    server = _Quiet((host, port), answers or handler(mode))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    serve(sys.argv[2], int(sys.argv[1]), "0.0.0.0")
    threading.Event().wait()
