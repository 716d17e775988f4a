"""A Docker engine socket that shows one OpenSandbox server only the containers it made itself.

An OpenSandbox server on Docker takes every container on its engine for its own. Each time it
starts, it arms an expiry for every sandbox container it lists, at the expiry written in the
container's labels when it was created (renewals made through another server are not in them),
and it removes every egress sidecar whose sandbox container it does not list. A create on
another server makes the sidecar a moment before its sandbox container, so a server starting
at that moment removes the sidecar of a create in flight, and that create fails
(``DOCKER::SANDBOX_START_FAILED``, "No such container"). Two servers on one engine are that
unsafe in production too; here, the tests that start and restart servers of their own
(tests/own_server.py) run beside tests that create sandboxes on the stack's servers.

So a server of a test's own reaches the engine through this view, a socket in front of the
engine's: every request passes through unchanged, except that a list of containers answers
only with those created through this view, as if the server had an engine of its own.
"""

from __future__ import annotations

import json
import os
import re
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

ENGINE_SOCKET = "/var/run/docker.sock"
CHUNK = 65536
# The two calls the view reads, with or without an API version in front.
LIST = re.compile(rb"^GET (/v[0-9.]+)?/containers/json(\?\S*)? HTTP/1\.[01]$")
CREATE = re.compile(rb"^POST (/v[0-9.]+)?/containers/create(\?\S*)? HTTP/1\.[01]$")
HOP_HEADERS = (b"connection", b"keep-alive", b"content-length", b"transfer-encoding")


class _Head:
    """A request's or response's first line and headers, as sent."""

    def __init__(self, first: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.first = first
        self.headers = headers

    def get(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k.lower() == name), None)

    @property
    def chunked(self) -> bool:
        return (self.get(b"transfer-encoding") or b"").lower().strip() == b"chunked"

    def encode(self, **replaced: bytes) -> bytes:
        """The head with the hop headers dropped and ``replaced``'s (``Content_Length`` for
        Content-Length) set instead; with no ``replaced``, as it came."""
        if not replaced:
            kept = self.headers
        else:
            kept = [(k, v) for k, v in self.headers if k.lower() not in HOP_HEADERS]
            kept += [(k.replace("_", "-").encode(), v) for k, v in replaced.items()]
        lines = [self.first, *(k + b": " + v for k, v in kept)]
        return b"\r\n".join(lines) + b"\r\n\r\n"


def _read_head(stream: BinaryIO) -> _Head | None:
    first = stream.readline()
    if not first:
        return None
    headers = []
    while (line := stream.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.partition(b":")
        headers.append((name.strip(), value.strip()))
    return _Head(first.rstrip(b"\r\n"), headers)


def _read_body(head: _Head, stream: BinaryIO, *, to_eof: bool) -> bytes:
    """The whole body, de-chunked; without a length, to the end of the stream if ``to_eof``."""
    if head.chunked:
        body = bytearray()
        while size := int(stream.readline().split(b";")[0].strip() or b"0", 16):
            body += stream.read(size)
            stream.readline()
        while stream.readline() not in (b"\r\n", b"\n", b""):  # trailers
            pass
        return bytes(body)
    length = head.get(b"content-length")
    if length is not None:
        return stream.read(int(length))
    return stream.read() if to_eof else b""


def _relay(source: BinaryIO, target: socket.socket) -> None:
    """Everything ``source`` still has, as it comes, until it ends."""
    try:
        while data := source.read1(CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class _Handler(socketserver.StreamRequestHandler):
    server: _ViewServer

    def handle(self) -> None:
        try:
            while self._one_request():
                pass
        except (OSError, ValueError):
            pass  # the server hung up mid-request, as a killed server does

    def _one_request(self) -> bool:
        """Answers one request; False when the connection is done."""
        head = _read_head(self.rfile)
        if head is None:
            return False
        body = _read_body(head, self.rfile, to_eof=False)
        engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        engine.connect(self.server.engine)
        with engine, engine.makefile("rb") as answers:
            if head.get(b"upgrade") is not None:  # attach, exec: a stream both ways, to the end
                engine.sendall(head.encode() + body)
                back = threading.Thread(target=_relay, args=(self.rfile, engine), daemon=True)
                back.start()
                _relay(answers, self.connection)
                back.join()
                return False
            length = b"%d" % len(body)
            engine.sendall(head.encode(Content_Length=length, Connection=b"close") + body)
            if LIST.match(head.first) or CREATE.match(head.first):
                answer = _read_head(answers)
                if answer is None:
                    return False
                content = self._seen(head, answer, _read_body(answer, answers, to_eof=True))
                self.wfile.write(answer.encode(Content_Length=b"%d" % len(content)) + content)
                return True
            # Anything else as it comes (archives, logs and events stream), closing after it.
            answer = _read_head(answers)
            if answer is None:
                return False
            self.wfile.write(answer.encode(Connection=b"close", **_framing(answer)))
            self.wfile.flush()
            _relay(answers, self.connection)
            return False

    def _seen(self, request: _Head, answer: _Head, content: bytes) -> bytes:
        """What the server sees of a list or a create: its own containers only."""
        if not answer.first.split(b" ")[1].startswith(b"2"):
            return content
        if CREATE.match(request.first):
            self.server.made.add(json.loads(content)["Id"])
            return content
        listed = json.loads(content)
        return json.dumps([c for c in listed if c.get("Id") in self.server.made]).encode()


def _framing(answer: _Head) -> dict[str, bytes]:
    """The answer's own framing headers, kept as they came, for a body relayed unread."""
    framing = {}
    if answer.chunked:
        framing["Transfer_Encoding"] = b"chunked"
    elif (length := answer.get(b"content-length")) is not None:
        framing["Content_Length"] = length
    return framing


class _ViewServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, engine: str) -> None:
        self.engine = engine
        self.made: set[str] = set()  # the ids of the containers created through the view
        super().__init__(str(path), _Handler)


def _engine_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "")
    return host.removeprefix("unix://") if host.startswith("unix://") else ENGINE_SOCKET


@contextmanager
def engine_view(path: Path) -> Iterator[str]:
    """A view of the engine at ``path``, served until the block ends; yields its DOCKER_HOST."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    server = _ViewServer(path, _engine_socket())
    thread = threading.Thread(target=server.serve_forever, name=f"engine view {path.name}")
    thread.daemon = True
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        path.unlink(missing_ok=True)
