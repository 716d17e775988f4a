"""
A stand-in for the OpenSandbox server and one sandbox's services on loopback, answering as
scripted: the server resolves every port of the sandbox to a path of its own, as its proxy
does, and each request to a service takes the next of that service's scripted answers.
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
from opensandbox_provider.sandbox._http import SandboxHttp

# An answer that never comes: the request is held until the server stops.
SILENT = "silent"


@dataclass
class Scripted:
    """Answers by path: ``(status, JSON body)`` or :data:`SILENT`, the last one repeated."""

    answers: dict[str, list[tuple[int, object] | str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)

    def next_for(self, path: str) -> tuple[int, object] | str:
        self.asked.append(path)
        queue = self.answers.get(path) or [(404, {"code": "NOT_FOUND", "message": path})]
        return queue.pop(0) if len(queue) > 1 else queue[0]


@contextmanager
def sandbox_services(script: Scripted) -> Iterator[SandboxHttp]:
    """A :class:`SandboxHttp` for sandbox ``sbx`` of a server on loopback that answers ``script``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?", 1)[0]
            if "/endpoints/" in path:
                port = path.rsplit("/", 1)[1]
                host, own_port = self.server.server_address[:2]
                self._send(200, {"endpoint": f"{host}:{own_port}/proxy/{port}"})
                return
            answer = script.next_for(path)
            if answer == SILENT:
                script.released.wait()
                return
            status, body = answer  # type: ignore[misc]
            self._send(status, body)

        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = ConnectionConfig(
        domain=f"127.0.0.1:{server.server_address[1]}",
        protocol="http",
        request_timeout=timedelta(seconds=30),
    )
    sandbox = SandboxSync.connect("sbx", connection_config=config, skip_health_check=True)
    try:
        yield SandboxHttp(sandbox)
    finally:
        script.released.set()
        sandbox.close()
        server.shutdown()
        server.server_close()
