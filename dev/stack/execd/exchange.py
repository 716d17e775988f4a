"""HTTP plumbing: one request, execd's ways of answering it, and gin's defaults."""

import select
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

from go_encoding import go_json

# execd's error codes (docs/execd-wire.rst, wire-errors).
INVALID_REQUEST_BODY = "INVALID_REQUEST_BODY"
MISSING_QUERY = "MISSING_QUERY"
RUNTIME_ERROR = "RUNTIME_ERROR"
INVALID_FILE = "INVALID_FILE"
INVALID_FILE_CONTENT = "INVALID_FILE_CONTENT"
INVALID_FILE_METADATA = "INVALID_FILE_METADATA"
FILE_NOT_FOUND = "FILE_NOT_FOUND"
UNKNOWN = "UNKNOWN"


class ApiError(Exception):
    """An error execd answers as JSON {"code": ..., "message": ...}
    (docs/execd-wire.rst, wire-errors)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def bad_request(message: str) -> ApiError:
    """A 400 INVALID_REQUEST_BODY, execd's answer to most requests it cannot serve
    (docs/execd-wire.rst, wire-errors)."""
    return ApiError(400, INVALID_REQUEST_BODY, message)


def runtime_error(message: str) -> ApiError:
    """A 500 RUNTIME_ERROR, execd's answer to most failures while serving a request
    (docs/execd-wire.rst, wire-errors)."""
    return ApiError(500, RUNTIME_ERROR, message)


class Exchange:
    """One HTTP request and the answers execd gives, written through the stdlib handler."""

    def __init__(self, handler: BaseHTTPRequestHandler, path: str, raw_query: str):
        self.handler = handler
        self.method = handler.command
        self.path = path
        self.raw_query = raw_query
        self.query = parse_qs(raw_query, keep_blank_values=True)
        self.headers = handler.headers
        self._body: bytes | None = None
        self.responded = False

    def query_value(self, name: str) -> str:
        """gin's c.Query: the first value, or "" when absent."""
        return self.query.get(name, [""])[0]

    def query_values(self, name: str) -> list[str]:
        return self.query.get(name, [])

    def required_query_value(self, name: str) -> str:
        """A query parameter execd cannot do without; absent or empty is MISSING_QUERY
        (docs/execd-wire.rst, wire-errors)."""
        value = self.query_value(name)
        if not value:
            raise ApiError(400, MISSING_QUERY, f"missing query parameter '{name}'")
        return value

    def body(self) -> bytes:
        """The whole request body; read before any answer, so the connection stays usable."""
        if self._body is None:
            self._body = self._read_body()
        return self._body

    def _read_body(self) -> bytes:
        stream = self.handler.rfile
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            # The SDK streams uploads with Transfer-Encoding: chunked in direct mode
            # (docs/execd-wire.rst, wire-upload).
            chunks = []
            while True:
                size = int(stream.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while stream.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(stream.read(size))
                stream.readline()
        return stream.read(int(self.headers.get("Content-Length") or 0))

    def respond(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self._send_head(status, {**(headers or {}), "Content-Length": str(len(body))})
        if self.method != "HEAD":
            self.handler.wfile.write(body)

    def respond_empty(self) -> None:
        """RespondSuccess(nil) is a 200 with an empty body (docs/execd-wire.rst, wire-errors)."""
        self.respond(200)

    def respond_json(self, value, status: int = 200) -> None:
        """gin's c.JSON (docs/execd-wire.rst, wire-errors)."""
        self.respond(status, go_json(value), {"Content-Type": "application/json; charset=utf-8"})

    def respond_error(self, error: ApiError) -> None:
        """RespondError(status, code, message); both keys are omitempty
        (docs/execd-wire.rst, wire-errors)."""
        body = {"code": error.code}
        if error.message:
            body["message"] = error.message
        self.respond_json(body, error.status)

    def respond_text(self, status: int, text: str, headers: dict | None = None) -> None:
        """Go's http.Error: text/plain, the message plus a newline."""
        self.respond(
            status,
            (text + "\n").encode(),
            {
                **(headers or {}),
                "Content-Type": "text/plain; charset=utf-8",
                "X-Content-Type-Options": "nosniff",
            },
        )

    def respond_not_found(self) -> None:
        """gin's default for unknown routes and wrong methods (no 405s)
        (docs/execd-wire.rst, wire-routes)."""
        self.respond(404, b"404 page not found", {"Content-Type": "text/plain"})

    def respond_stream(self, status: int, headers: dict, source, length: int) -> None:
        """A body of `length` bytes copied from a file, without holding it in memory; a file
        that shrank meanwhile ends it short and closes the connection, as Go's server does when
        a handler writes less than it declared (docs/execd-wire.rst, wire-download)."""
        self._send_head(status, {**headers, "Content-Length": str(length)})
        if self.method == "HEAD":
            return
        while length > 0:
            chunk = source.read(min(length, 1 << 20))
            if not chunk:
                self.close_connection()
                return
            self.handler.wfile.write(chunk)
            length -= len(chunk)

    def respond_declared(self, status: int, headers: dict, body: bytes) -> None:
        """Headers that declare their own Content-Length, whatever the body; the connection is
        closed after it, as Go's server does when a handler writes less than it declared."""
        self._send_head(status, headers)
        self.handler.wfile.write(body)
        self.close_connection()

    def _send_head(self, status: int, headers: dict) -> None:
        self.body()
        self.responded = True
        self.handler.log_request(status)
        self.handler.send_response_only(status)
        # Go's net/http adds a Date unless the handler (or a proxied server) set one; no Server.
        if not any(name.lower() == "date" for name in headers):
            self.handler.send_header("Date", self.handler.date_time_string())
        for name, value in headers.items():
            # Go's net/http writes every response header value with each CR and LF replaced by a
            # space, so a file name holding a newline cannot break the header block
            # (docs/execd-wire.rst, wire-paths).
            self.handler.send_header(name, value.replace("\r", " ").replace("\n", " "))
        self.handler.end_headers()

    def start_chunked(self, status: int, headers: dict) -> None:
        self._send_head(status, {**headers, "Transfer-Encoding": "chunked"})
        self.handler.wfile.flush()

    def write_chunk(self, data: bytes) -> None:
        self.write_chunks([data])

    def write_chunks(self, payloads: list[bytes]) -> None:
        """Each payload is its own chunk, as if written one by one, but all go out in one write:
        the bytes are the same, only how they are cut into TCP segments differs, and no HTTP
        client may depend on that."""
        framed = b"".join([b"%x\r\n%s\r\n" % (len(data), data) for data in payloads if data])
        if framed:
            self.handler.wfile.write(framed)
            self.handler.wfile.flush()

    def end_chunked(self) -> None:
        self.handler.wfile.write(b"0\r\n\r\n")
        self.handler.wfile.flush()

    def close_connection(self) -> None:
        self.handler.close_connection = True

    def wait_for_client_to_hang_up(self) -> None:
        """Blocks until the client closes its side of the connection."""
        connection = self.handler.connection
        while True:
            select.select([connection], [], [])
            try:
                if not connection.recv(4096):
                    return
            except OSError:
                return
