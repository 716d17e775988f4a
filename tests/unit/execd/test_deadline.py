"""Every call ends by its deadline, against an execd on loopback that drips its answers.

httpx bounds each read on its own, so an answer that keeps trickling in keeps a request alive;
these answers trickle in their headers, their body, or a command stream's chunk-size line, each
byte well inside the per-read timeout, for far longer than any deadline here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError
from opensandbox import SandboxSync
from opensandbox.transport import unwrap_retry_transport

from opensandbox_provider._connection_config import ConnectionConfig
from opensandbox_provider._exchange import SOCKET_BODY
from opensandbox_provider._transport import DeadlineTransport
from opensandbox_provider.execd import _execd, _http
from opensandbox_provider.execd._deadline import Deadline
from opensandbox_provider.execd._execd import Execd, StreamWindows
from opensandbox_provider.execd._http import SandboxHttp
from opensandbox_provider.execd._stream_end import Abandoned, EndedByItself
from tests.unit.execd_wire import complete

# One byte this often: far inside the per-read timeout below, so only a deadline ends a call.
DRIP_INTERVAL = 0.2
DRIP_BYTES = 150  # 30 s of dripping, were nothing to end it
READ_TIMEOUT = 5.0
DEADLINE = 1.0
# How many times its bound a call may take on a loaded two-core machine, a read in flight
# included. The longest bound here (6 s) times this is still well short of the 30 s a drip
# lasts, so a call that waited for the drip to end still fails.
LOADED = 3

HEADERS_THEN_DRIP = {
    # The status line, then a header that never ends.
    "headers": b"HTTP/1.1 200 OK\r\nX-Slow: ",
    # Whole headers, then a body that never ends.
    "body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
    # An event stream whose first chunk-size line never ends: leading zeros are valid hex.
    "chunk-size": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    ),
}
DRIPPED = {"headers": b"x", "body": b" ", "chunk-size": b"0"}
# A command's whole stream at once, for the read path a healthy execd takes.
WHOLE_STREAM = HEADERS_THEN_DRIP["chunk-size"] + b"%x\r\n%s\r\n0\r\n\r\n" % (
    len(complete()),
    complete(),
)


class DrippingExecd(ThreadingHTTPServer):
    """The server's endpoint lookup, answered at once, and an execd that drips every answer."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = "headers"
        self.stopped = threading.Event()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: DrippingExecd

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test's output is its assertions."""

    def do_GET(self) -> None:
        if "/endpoints/" in self.path:
            port = self.path.rsplit("/", 1)[1]
            body = f'{{"endpoint": "{self.server.address}/proxy/{port}"}}'.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self._drip()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._drip()

    def _drip(self) -> None:
        mode = self.server.mode
        if mode == "whole":
            self.wfile.write(WHOLE_STREAM)
            self.close_connection = True
            return
        try:
            self.wfile.write(HEADERS_THEN_DRIP[mode])
            self.wfile.flush()
            for _ in range(DRIP_BYTES):
                if self.server.stopped.wait(DRIP_INTERVAL):
                    break
                self.wfile.write(DRIPPED[mode])
                self.wfile.flush()
        except OSError:
            pass  # the client gave up and closed the connection: what the test wants
        self.close_connection = True


@pytest.fixture
def dripping() -> Iterator[DrippingExecd]:
    server = DrippingExecd()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.stopped.set()
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def execd(dripping: DrippingExecd) -> Iterator[Execd]:
    # The provider's own connection config, so the transport is the one it builds.
    config = ConnectionConfig(
        domain=dripping.address,
        protocol="http",
        request_timeout=timedelta(seconds=READ_TIMEOUT),
    )
    sandbox = SandboxSync.connect("sbx", connection_config=config, skip_health_check=True)
    try:
        yield Execd(sandbox, SandboxHttp(sandbox))
    finally:
        sandbox.close()


def ends_by_its_deadline(call: Callable[[], object]) -> SandboxError:
    started = time.monotonic()
    with pytest.raises(SandboxError) as raised:
        call()
    elapsed = time.monotonic() - started
    assert elapsed < DEADLINE * LOADED, f"took {elapsed:.1f}s against a deadline of {DEADLINE}s"
    return raised.value


@pytest.mark.parametrize("mode", ["headers", "body"])
def test_a_file_description_that_trickles_in_ends_by_its_deadline(
    dripping: DrippingExecd, execd: Execd, mode: str
) -> None:
    dripping.mode = mode
    error = ends_by_its_deadline(
        lambda: execd.file_info("/a", purpose="read", deadline=Deadline.after(DEADLINE))
    )
    assert "had not finished answering after the 1s allowed" in str(error)


@pytest.mark.parametrize("mode", ["headers", "body"])
def test_a_listing_that_trickles_in_ends_by_its_deadline(
    dripping: DrippingExecd, execd: Execd, mode: str
) -> None:
    dripping.mode = mode
    ends_by_its_deadline(
        lambda: execd.list_directory("/d", limit=10, deadline=Deadline.after(DEADLINE))
    )


@pytest.mark.parametrize("mode", ["headers", "body"])
def test_a_download_that_trickles_in_ends_by_its_deadline(
    dripping: DrippingExecd, execd: Execd, mode: str
) -> None:
    dripping.mode = mode
    ends_by_its_deadline(
        lambda: b"".join(execd.download("/a", max_bytes=10, deadline=Deadline.after(DEADLINE)))
    )


def test_an_upload_answered_a_byte_at_a_time_ends_by_its_deadline(
    dripping: DrippingExecd, execd: Execd
) -> None:
    # The upload is the SDK's own request; the connection it goes over keeps the deadline.
    dripping.mode = "headers"
    ends_by_its_deadline(lambda: execd.upload("/f", b"x", deadline=Deadline.after(DEADLINE)))


def test_a_command_stream_that_trickles_framing_is_given_up_at_its_backstop(
    dripping: DrippingExecd, execd: Execd
) -> None:
    # Bytes keep coming, so the stream never stalls, yet none of them is an event: the
    # backstop, the command's budget plus its grace, must count them all.
    dripping.mode = "chunk-size"
    started = time.monotonic()
    streamed = quick(execd, past_deadline=0.5).run(
        "true", timeout_ms=500, max_output_bytes=100, cwd=None
    )
    elapsed = time.monotonic() - started
    assert isinstance(streamed.stream_end, Abandoned)
    assert "past its 0.5s budget" in streamed.stream_end.why
    # The backstop is the 0.5 s budget plus the 0.5 s grace.
    assert elapsed < 1.0 * LOADED, f"took {elapsed:.1f}s against a backstop of 1s"


def test_command_headers_that_trickle_in_end_by_the_request_timeout_and_a_failed_ping(
    dripping: DrippingExecd, execd: Execd
) -> None:
    # execd sends its headers once the command has started, so they are waited for for the
    # request timeout, however long the stall window; a ping answered a byte at a time fails.
    dripping.mode = "headers"
    started = time.monotonic()
    streamed = quick(execd, stall=0.2, ping=DEADLINE).run(
        "true", timeout_ms=500, max_output_bytes=100, cwd=None
    )
    elapsed = time.monotonic() - started
    assert isinstance(streamed.stream_end, Abandoned)
    assert "had not answered the command 5s after it was sent" in streamed.stream_end.why
    assert "did not answer a ping within 1s" in streamed.stream_end.why
    bound = READ_TIMEOUT + DEADLINE
    assert bound <= elapsed < bound * LOADED, f"took {elapsed:.1f}s against {bound}s"


def quick(execd: Execd, **windows: float) -> Execd:
    """The same execd, with shorter stream windows."""
    return Execd(execd._sandbox, execd._http, StreamWindows(**windows))


@pytest.mark.parametrize("mode", ["headers", "body"])
def test_a_ping_answered_a_byte_at_a_time_is_no_answer_by_its_deadline(
    dripping: DrippingExecd, execd: Execd, mode: str
) -> None:
    dripping.mode = mode
    started = time.monotonic()
    assert execd.ping(within=DEADLINE) is False
    assert time.monotonic() - started < DEADLINE * LOADED


def test_the_sandboxes_transport_is_the_one_that_keeps_deadlines(execd: Execd) -> None:
    # Without it the headers of an answer would be bounded only read by read.
    transport = unwrap_retry_transport(execd._sandbox.connection_config.transport)
    assert isinstance(transport, DeadlineTransport)


def test_a_command_stream_is_still_read_from_the_socket_on_connections_that_keep_deadlines(
    dripping: DrippingExecd, execd: Execd
) -> None:
    # Each read checking the deadline must not cost the fast path that reads the socket itself.
    dripping.mode = "whole"
    with execd._http.stream(
        "POST", _execd.EXECD_PORT, "/command", "Run command", own_connection=True
    ) as response:
        assert response.extensions.get(SOCKET_BODY) is not None
        assert b"".join(_http.iter_body(response, READ_TIMEOUT)) == complete()
    streamed = execd.run("true", timeout_ms=1000, max_output_bytes=100, cwd=None)
    assert streamed.stream_end == EndedByItself() and streamed.ending is not None
