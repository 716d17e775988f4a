"""Serve one DNS answering function over UDP and TCP on the same address.

TCP matters because resolvers retry over TCP after a truncated UDP answer, and a
redirect of port 53 must catch both transports or TCP queries would slip past a policy.
"""

from __future__ import annotations

import socketserver
import struct
import threading
from collections.abc import Callable

Answer = Callable[[bytes], bytes | None]
_LENGTH = struct.Struct("!H")


class _UDPHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data, sock = self.request
        reply = self.server.answer(data)
        if reply is not None:
            sock.sendto(reply, self.client_address)


class _TCPHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        # RFC 7766: several length-prefixed queries may share one connection.
        while header := self.rfile.read(_LENGTH.size):
            if len(header) < _LENGTH.size:
                return
            data = self.rfile.read(_LENGTH.unpack(header)[0])
            reply = self.server.answer(data)
            if reply is None:
                return
            self.wfile.write(_LENGTH.pack(len(reply)) + reply)


class _UDPServer(socketserver.ThreadingUDPServer):
    daemon_threads = True
    allow_reuse_address = True


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class DNSServer:
    """Both listeners, serving from daemon threads until the process exits."""

    def __init__(self, host: str, port: int, answer: Answer) -> None:
        for server_class, handler in ((_UDPServer, _UDPHandler), (_TCPServer, _TCPHandler)):
            server = server_class((host, port), handler)
            server.answer = answer
            threading.Thread(target=server.serve_forever, daemon=True).start()
