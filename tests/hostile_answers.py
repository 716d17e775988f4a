"""
Answers a hostile guest gives on execd's port, served from loopback by the tests and, copied
into a sandbox, by the guest itself: a compression bomb, and an answer dripped a byte a second.

Standard library only, so that the guest's Python runs it as it is. Run as a script beside
``execd_recorder.py``, it takes execd's place as a guest can (:func:`take_over_execd`):
``python3 hostile_answers.py PORT MODE [BOMB_FILE]``, the bomb made by the test and copied in,
since making it costs the sandbox seconds of CPU.
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

# Names the mode on every answer.
GUEST_HEADER = "Hostile-Guest"


def compression_bomb(inflated: int = BOMB_INFLATED) -> bytes:
    """``inflated`` bytes of zeros as gzip: about a thousandth of that on the wire."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * MIB
    return b"".join(packer.compress(zeros) for _ in range(inflated // MIB)) + packer.flush()


def handler(mode: str, bomb: bytes | None = None) -> type[BaseHTTPRequestHandler]:
    """Answers every request in ``mode``: ``bomb`` (``bomb``, or one made here) or ``drip``."""
    if bomb is None:
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
            # How a test tells the guest's answer from execd's, through the server's proxy too.
            self.send_header(GUEST_HEADER, mode)
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


def take_over_execd(port: int, answers: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """
    As a guest root in its container can: kill whatever listens on execd's ``port`` and answer
    there itself, once the command that started this has had its stream end.
    """
    import os
    import signal

    # Beside this file in the sandbox; the recorder's way of finding execd, whatever its binary.
    from execd_recorder import SETTLE_S, START_S, listener_pid

    time.sleep(SETTLE_S)
    os.kill(listener_pid(port), signal.SIGKILL)
    deadline = time.monotonic() + START_S
    while True:
        try:
            return serve("", port, "0.0.0.0", answers)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


if __name__ == "__main__":
    mode, bomb_file = sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None
    bomb = open(bomb_file, "rb").read() if bomb_file else None
    take_over_execd(int(sys.argv[1]), handler(mode, bomb))
    threading.Event().wait()
