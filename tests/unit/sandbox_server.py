"""
A stand-in for the OpenSandbox server and one sandbox's services on loopback, answering as
scripted: the server resolves every port of the sandbox to a path of its own, as its proxy
does, and each request takes the next of the answers scripted for it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opensandbox import SandboxSync

from opensandbox_provider._connection_config import ConnectionConfig
from opensandbox_provider.execd._http import SandboxHttp

# An answer that never comes: the request is held until the server stops.
SILENT = "silent"
# The egress sidecar's port, and the token the server hands out with its endpoint
# (docs/execd-wire.rst, wire-egress-api).
EGRESS_PORT = 18080
EGRESS_TOKEN = {"OPENSANDBOX-EGRESS-AUTH": "sidecar-token"}
Answer = tuple[int, object] | tuple[int, object, dict[str, str]] | str


@dataclass
class Scripted:
    """
    Answers by ``"METHOD /path"`` or, for a GET, by path alone: ``(status, body)`` or
    ``(status, body, headers)`` with a body of bytes sent as it is and anything else as JSON,
    or :data:`SILENT`; the last answer of each is repeated. A request to the sidecar without
    its token is answered 401, as the sidecar does, unless ``sidecar_checks_token`` is off.
    """

    answers: dict[str, list[Answer]] = field(default_factory=dict)
    sidecar_checks_token: bool = True
    asked: list[str] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)

    def next_for(self, method: str, path: str) -> Answer:
        key = path if method == "GET" and path in self.answers else f"{method} {path}"
        self.asked.append(key)
        queue = self.answers.get(key) or [(404, {"code": "NOT_FOUND", "message": key})]
        return queue.pop(0) if len(queue) > 1 else queue[0]


@contextmanager
def serving(script: Scripted) -> Iterator[int]:
    """Serve ``script`` on a free loopback port, which it yields, until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._answer("GET")

        def do_DELETE(self) -> None:  # noqa: N802
            self._answer("DELETE")

        def _answer(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            if method == "GET" and "/endpoints/" in path:
                port = path.rsplit("/", 1)[1]
                host, own_port = self.server.server_address[:2]
                endpoint = {"endpoint": f"{host}:{own_port}/proxy/{port}"}
                if port == str(EGRESS_PORT):
                    endpoint["headers"] = EGRESS_TOKEN
                self._send(200, endpoint, {})
                return
            if path.startswith(f"/proxy/{EGRESS_PORT}/") and script.sidecar_checks_token:
                ((name, token),) = EGRESS_TOKEN.items()
                if self.headers.get(name) != token:
                    self._send(401, b"unauthorized", {})
                    return
            answer = script.next_for(method, path)
            if answer == SILENT:
                script.released.wait()
                return
            status, body, *headers = answer  # type: ignore[misc]
            self._send(status, body, headers[0] if headers else {})

        def _send(self, status: int, body: object, headers: dict[str, str]) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        script.released.set()
        server.shutdown()
        server.server_close()


@contextmanager
def sandbox_services(script: Scripted) -> Iterator[SandboxHttp]:
    """A :class:`SandboxHttp` for sandbox ``sbx`` of a loopback server answering ``script``."""
    with serving(script) as port:
        config = ConnectionConfig(
            domain=f"127.0.0.1:{port}", protocol="http", request_timeout=timedelta(seconds=30)
        )
        sandbox = SandboxSync.connect("sbx", connection_config=config, skip_health_check=True)
        try:
            yield SandboxHttp(sandbox)
        finally:
            sandbox.close()
