"""A loopback HTTP proxy in front of an OpenSandbox server that answers chosen requests with 5xx.

Everything else is relayed unchanged, streamed both ways, with the client's Host header kept: the
server builds its proxy-mode endpoints from the address the client used, so execd traffic in
server-proxy mode comes back through here too. A fault is a rule (method, path pattern, status,
how many times); the proxy counts what it injected and what it relayed, so a test can tell a
retried request from a relayed one.
"""

from __future__ import annotations

import http.client
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}
# Statuses that must not carry a body, so a chunked terminator after them would corrupt the stream.
BODILESS_STATUSES = {204, 304}
RELAY_TIMEOUT_SECONDS = 300


@dataclass
class Fault:
    method: str
    path: re.Pattern
    status: int
    times: int | None  # None: every matching request
    injected: int = 0

    def takes(self, method: str, path: str) -> bool:
        if method != self.method or not self.path.search(path):
            return False
        return self.times is None or self.injected < self.times


@dataclass
class FaultProxy:
    upstream_host: str
    upstream_port: int
    faults: list[Fault] = field(default_factory=list)
    relayed: list[tuple[str, str, int]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    def fail(self, method: str, path: str, status: int, *, times: int | None = None) -> Fault:
        fault = Fault(method, re.compile(path), status, times)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def start(self) -> None:
        proxy = self

        class Handler(_RelayHandler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.takes(method, path):
                    fault.injected += 1
                    return fault
        return None


class _RelayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: FaultProxy

    def log_message(self, format, *args):  # noqa: A002 - the base class names it so
        pass  # the request line carries nothing a test reads, and pytest's output stays clean

    def do_GET(self):
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def _handle(self) -> None:
        body = self._read_body()
        fault = self.owner._fault_for(self.command, self.path)
        if fault is not None:
            payload = (
                b'{"code":"INJECTED","message":"Injected by the reliability suite\'s fault proxy."}'
            )
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        upstream = http.client.HTTPConnection(
            self.owner.upstream_host, self.owner.upstream_port, timeout=RELAY_TIMEOUT_SECONDS
        )
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            if body is not None:
                headers["Content-Length"] = str(len(body))
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            with self.owner._lock:
                self.owner.relayed.append((self.command, self.path, response.status))
            self._relay(response)
        except OSError:
            # The upstream went away mid-request; the client sees its connection drop, as it
            # would without the proxy.
            self.close_connection = True
        finally:
            upstream.close()

    def _read_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _relay(self, response: http.client.HTTPResponse) -> None:
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if response.status in BODILESS_STATUSES or self.command == "HEAD":
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while chunk := response.read1(65536):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
