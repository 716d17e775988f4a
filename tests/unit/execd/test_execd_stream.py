"""Reading one command's event stream over HTTP, against a scripted execd on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxTerminalError
from opensandbox.models.sandboxes import SandboxEndpoint

from opensandbox_provider._connection_config import ConnectionConfig
from opensandbox_provider._errors import ErrorAnswer
from opensandbox_provider._exchange import SOCKET_BODY
from opensandbox_provider.execd import _deadline, _execd, _http, _recovery
from opensandbox_provider.execd._execd import Execd, StreamWindows
from opensandbox_provider.execd._http import SandboxHttp
from opensandbox_provider.execd._stream_end import (
    Abandoned,
    BrokeEndRecovered,
    BrokeEndUnknown,
    EndedByItself,
)
from tests.unit.execd_wire import COMMAND_ID, complete, frame

# How long a scripted execd holds a connection open that the reader should have left.
HOLD = 60.0
# Generous bound on a call that should return long before it: only there so a broken reader
# fails the test instead of hanging it.
NO_HANG = 20.0
# A stall window short enough for a test; the rest as in production.
QUICK = StreamWindows(stall=0.5)
# What a bounded call may take past its bound at least, a read in flight; see loaded().
SLACK = 1.5


def loaded(bound: float) -> float:
    """
    How long a call bounded by ``bound`` may take on a loaded two-core machine: three times
    its bound, and never less than the bound plus :data:`SLACK`. Every call bounded here would
    otherwise wait for a scripted execd's HOLD, far longer.
    """
    return max(3 * bound, bound + SLACK)


class ScriptedExecd:
    """A loopback HTTP server whose POST /command answer is a script written by the test."""

    def __init__(self, script: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.requests: list[dict] = []
        # Each POST's Connection header, as sent.
        self.connection_headers: list[str | None] = []
        self.client_left = threading.Event()
        # Off: a ping is answered 501, as by a server that is not execd; on: 200, as execd does.
        self.answers_ping = False
        self.pings = 0
        # When each ping came, on the monotonic clock.
        self.pinged_at: list[float] = []
        self._pinged = threading.Condition()
        # When the answer to the command had sent its headers, on the monotonic clock.
        self.stream_opened_at: float | None = None
        # The answers to GET /command/status/{id}, in turn, the last one for every later
        # request: (status code, JSON body). None is no answer at all (the request is held).
        self.statuses: list[tuple[int, dict] | None] = [(501, {})]
        self.status_requests: list[str] = []
        execd = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.startswith("/command/status/"):
                    execd.status_requests.append(self.path.rsplit("/", 1)[-1])
                    turn = min(len(execd.status_requests), len(execd.statuses))
                    answer = execd.statuses[turn - 1]
                    if answer is None:
                        time.sleep(HOLD)
                        return
                    code, body = answer
                    data = json.dumps(body).encode()
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                with execd._pinged:
                    execd.pings += 1
                    execd.pinged_at.append(time.monotonic())
                    execd._pinged.notify_all()
                self.send_response(200 if execd.answers_ping else 501)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                execd.connection_headers.append(self.headers.get("Connection"))
                length = int(self.headers.get("Content-Length", 0))
                execd.requests.append(json.loads(self.rfile.read(length)))
                try:
                    script(self)
                except (BrokenPipeError, ConnectionResetError):
                    execd.client_left.set()

            def end_headers(self) -> None:
                super().end_headers()
                if self.command == "POST":
                    execd.stream_opened_at = time.monotonic()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def wait_for_pings(self, count: int) -> bool:
        """Wait until execd has been pinged ``count`` times; whether it was, within NO_HANG."""
        with self._pinged:
            return self._pinged.wait_for(lambda: self.pings >= count, timeout=NO_HANG)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class LoopbackSandbox:
    """What SandboxHttp needs of a sandbox, with every service at the scripted execd."""

    id = "loopback"

    def __init__(self, port: int, request_timeout: float = 5.0) -> None:
        # With the transport a sandbox made on the provider's connection config has.
        self.connection_config = ConnectionConfig(
            request_timeout=timedelta(seconds=request_timeout)
        ).with_transport_if_missing()
        self._port = port

    def get_endpoint(self, port: int) -> SandboxEndpoint:
        return SandboxEndpoint(endpoint=f"127.0.0.1:{self._port}")


def loopback_execd(
    port: int, windows: StreamWindows | None = None, request_timeout: float = 5.0
) -> Execd:
    sandbox = LoopbackSandbox(port, request_timeout)
    return Execd(sandbox, SandboxHttp(sandbox), windows)


def event_stream(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()


def send(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()


def hold_with_heartbeats(handler: BaseHTTPRequestHandler, interval: float = 0.2) -> None:
    # Writing is how a server learns its client has gone: execd's heartbeat does the same.
    deadline = time.monotonic() + HOLD
    while time.monotonic() < deadline:
        time.sleep(interval)
        send(handler, frame("ping", "pong"))


@pytest.fixture(autouse=True)
def quick_recovery(monkeypatch) -> None:
    """A broken stream's command is asked after for a second, not half a minute."""
    monkeypatch.setattr(_recovery, "EXECD_UNREACHABLE_BOUND", 1.0)
    monkeypatch.setattr(_recovery, "STATUS_POLL_INTERVAL", 0.05)
    monkeypatch.setattr(_recovery, "STATUS_REQUEST_TIMEOUT", 0.5)


@pytest.fixture
def execd_with() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], ScriptedExecd]]:
    servers: list[ScriptedExecd] = []

    def start(script: Callable[[BaseHTTPRequestHandler], None]) -> ScriptedExecd:
        servers.append(ScriptedExecd(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def run(
    execd: ScriptedExecd,
    command: str = "x",
    *,
    timeout_ms: int = 600_000,
    gone: Callable[[], bool] = lambda: False,
    windows: StreamWindows | None = None,
    request_timeout: float = 5.0,
) -> object:
    return loopback_execd(execd.port, windows, request_timeout).run(
        command, timeout_ms=timeout_ms, max_output_bytes=100, cwd=None, gone=gone
    )


def run_in_thread(call: Callable[[], object]) -> dict:
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["result"] = call()
        except BaseException as e:  # handed to the test to assert on
            outcome["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(NO_HANG)
    outcome["returned"] = not thread.is_alive()
    return outcome


def test_the_result_comes_back_at_the_terminal_event_while_execd_holds_the_stream(
    execd_with,
) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, frame("init", COMMAND_ID) + frame("stdout", "hi") + complete())
        hold_with_heartbeats(handler)  # execd's grace period, stretched to a minute

    execd = execd_with(script)
    outcome = run_in_thread(lambda: run(execd, "echo hi", timeout_ms=5000))
    assert outcome["returned"], "Execd.run waited for the stream to end after the terminal event"
    streamed = outcome["result"]
    assert streamed.stream_end == EndedByItself()
    assert streamed.ending.exit_code == 0
    assert streamed.parser.stdout.text() == "hi\n"
    # The reader hung up rather than leaving the connection to execd.
    assert execd.client_left.wait(NO_HANG)


def test_the_command_and_its_deadline_are_sent_to_execd(execd_with) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, complete())

    execd = execd_with(script)
    run(execd, "sleep 1", timeout_ms=2500)
    assert execd.requests == [{"command": "sleep 1", "timeout": 2500}]


def test_a_command_asks_for_its_connection_to_be_closed_so_a_go_proxy_keeps_its_stream(
    execd_with,
) -> None:
    # Through OpenSandbox's ingress gateway, a request that does not say close may lose its
    # stream when the gateway is busy (see opensandbox_provider._exchange's _send).
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, complete())

    execd = execd_with(script)
    run(execd, "true")
    assert execd.connection_headers == ["close"]


def test_a_silent_stream_is_abandoned_as_stalled(execd_with) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, frame("init", COMMAND_ID) + frame("stdout", "before the stall"))
        time.sleep(HOLD)

    execd = execd_with(script)
    outcome = run_in_thread(lambda: run(execd, windows=QUICK))
    assert outcome["returned"]
    streamed = outcome["result"]
    assert isinstance(streamed.stream_end, Abandoned)
    assert "sent nothing for 0.5s" in streamed.stream_end.why
    assert streamed.ending is None
    assert streamed.parser.stdout.text() == "before the stall\n"


def test_a_silence_is_waited_out_while_execd_answers_its_ping(execd_with) -> None:
    # The real execd sends nothing for longer than the window while it encodes one huge line,
    # and answers a ping meanwhile: the command must not be abandoned for it.

    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, frame("init", COMMAND_ID))
        # Three windows without a byte, each ended by an answered ping.
        execd.wait_for_pings(3)
        send(handler, frame("stdout", "the huge line") + complete())

    execd = execd_with(script)
    execd.answers_ping = True
    outcome = run_in_thread(lambda: run(execd, windows=QUICK))
    assert outcome["returned"]
    streamed = outcome["result"]
    assert streamed.stream_end == EndedByItself()
    assert streamed.ending.exit_code == 0
    assert streamed.parser.stdout.text() == "the huge line\n"
    assert execd.pings >= 3


def test_a_silence_with_execd_not_answering_its_ping_is_abandoned_and_says_so(
    execd_with,
) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, frame("init", COMMAND_ID))
        time.sleep(HOLD)

    execd = execd_with(script)
    outcome = run_in_thread(lambda: run(execd, windows=QUICK))
    assert outcome["returned"]
    end = outcome["result"].stream_end
    assert isinstance(end, Abandoned) and "execd did not answer a ping" in end.why
    assert execd.pings == 1


def test_a_slow_start_is_waited_for_for_the_request_timeout_not_the_stall_window(
    execd_with,
) -> None:
    # execd sends its headers with the first event, once the process has started.
    def script(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(1.5)  # three stall windows
        event_stream(handler)
        send(handler, frame("init", COMMAND_ID) + complete())

    execd = execd_with(script)
    streamed = run(execd, windows=StreamWindows(stall=0.5), request_timeout=5.0)
    assert (streamed.stream_end, streamed.ending.exit_code) == (EndedByItself(), 0)
    assert execd.pings == 0


def test_a_command_never_answered_is_abandoned_only_once_a_ping_fails_and_says_so(
    execd_with,
) -> None:
    execd = execd_with(lambda handler: time.sleep(HOLD))
    started = time.monotonic()
    outcome = run_in_thread(
        lambda: run(execd, windows=StreamWindows(ping=0.5), request_timeout=1.0)
    )
    assert outcome["returned"]
    assert outcome["result"].stream_end == Abandoned(
        "execd had not answered the command 1s after it was sent, and then did not answer a "
        "ping within 0.5s"
    )
    assert execd.pings == 1
    # The request timeout, then the ping's window.
    assert time.monotonic() - started < loaded(1.0 + 0.5)


def test_a_background_command_never_answered_says_why_its_start_was_given_up(
    execd_with,
) -> None:
    execd = execd_with(lambda handler: time.sleep(HOLD))
    client = loopback_execd(execd.port, StreamWindows(ping=0.5), request_timeout=1.0)
    outcome = run_in_thread(lambda: client.start("x", timeout_ms=600_000, cwd=None))
    assert outcome["returned"]
    assert str(outcome["error"]) == (
        "Sandbox loopback did not say which command it started: execd had not answered the "
        "command 1s after it was sent, and then did not answer a ping within 0.5s."
    )


def test_a_background_stream_that_ends_without_an_id_says_no_command_was_started(
    execd_with,
) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        handler.wfile.write(b"0\r\n\r\n")

    client = loopback_execd(execd_with(script).port)
    with pytest.raises(SandboxError) as raised:
        client.start("x", timeout_ms=600_000, cwd=None)
    assert str(raised.value) == "Sandbox loopback did not say which command it started."


def test_a_command_never_answered_by_an_execd_that_answers_its_ping_keeps_the_sandbox(
    execd_with,
) -> None:
    # execd is there but has not started the command: the sandbox is not destroyed for it,
    # and the error says the command was not sent twice.
    execd = execd_with(lambda handler: time.sleep(HOLD))
    execd.answers_ping = True
    outcome = run_in_thread(lambda: run(execd, request_timeout=1.0))
    assert outcome["returned"]
    error = outcome["error"]
    assert isinstance(error, SandboxError) and not isinstance(error, SandboxTerminalError)
    assert "had not started the command 1s after it was sent" in str(error)
    assert "was not sent again" in str(error)
    assert execd.pings == 1


def test_heartbeats_without_an_end_are_abandoned_past_the_budget(execd_with) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, frame("init", COMMAND_ID))
        hold_with_heartbeats(handler, interval=0.1)

    execd = execd_with(script)
    started = time.monotonic()
    outcome = run_in_thread(
        lambda: run(execd, windows=StreamWindows(past_deadline=0.5), timeout_ms=200)
    )
    assert outcome["returned"]
    end = outcome["result"].stream_end
    assert isinstance(end, Abandoned) and "still open 0.5s past its 0.2s budget" in end.why
    elapsed = time.monotonic() - started
    assert 0.7 <= elapsed < loaded(0.7), f"given up {elapsed:.2f}s after the start"


def test_a_stream_silent_past_its_deadline_is_dead_whatever_execds_ping_says(execd_with) -> None:
    # The stream dies after its first frame while execd answers every ping. Past the deadline
    # execd has killed the command, so no ping is sent: the command's status says how it ended.
    execd = execd_with(silent_after(frame("init", COMMAND_ID)))
    execd.answers_ping = True
    execd.statuses = [ended(-1, "signal: killed")]
    started = time.monotonic()
    outcome = run_in_thread(
        lambda: run(execd, windows=StreamWindows(stall=0.5, past_deadline=2.0), timeout_ms=200)
    )
    elapsed = time.monotonic() - started
    streamed = outcome["result"]
    assert isinstance(streamed.stream_end, BrokeEndRecovered)
    assert streamed.ending.exit_code == -1
    assert "the command's 0.2s deadline had passed" in streamed.stream_end.why
    assert execd.pings == 0
    assert execd.status_requests == [COMMAND_ID]
    # The first silent window ends past the deadline, and the status answers at once.
    assert elapsed < loaded(0.2 + 0.5), f"took {elapsed:.2f}s"


def test_a_stream_silent_before_its_deadline_is_pinged_until_the_deadline_then_recovered(
    execd_with,
) -> None:
    execd = execd_with(silent_after(frame("init", COMMAND_ID)))
    execd.answers_ping = True
    execd.statuses = [ended(-1, "signal: killed")]
    started = time.monotonic()
    outcome = run_in_thread(
        lambda: run(execd, windows=StreamWindows(stall=0.5, past_deadline=2.0), timeout_ms=2000)
    )
    elapsed = time.monotonic() - started
    streamed = outcome["result"]
    assert isinstance(streamed.stream_end, BrokeEndRecovered)
    assert streamed.ending.exit_code == -1
    # Silent windows end at about 0.5, 1, 1.5 and 2 s: the first three are before the deadline.
    assert execd.pings >= 2
    # No ping past the deadline is the product's promise, so it is held exact. The deadline's
    # clock starts when the reader has execd's answer, no sooner than its headers were sent.
    opened = execd.stream_opened_at
    assert opened is not None
    assert all(at - opened < 2.0 for at in execd.pinged_at)
    assert "deadline had passed" in streamed.stream_end.why
    assert 2.0 <= elapsed < loaded(2.0 + 0.5), f"took {elapsed:.2f}s"


def test_a_silent_stream_whose_status_never_comes_is_given_up_by_the_deadline_plus_grace(
    execd_with,
) -> None:
    execd = execd_with(silent_after(frame("init", COMMAND_ID)))
    execd.answers_ping = True
    execd.statuses = [None]  # every status request held unanswered
    started = time.monotonic()
    outcome = run_in_thread(
        lambda: run(execd, windows=StreamWindows(stall=0.3, past_deadline=0.6), timeout_ms=200)
    )
    elapsed = time.monotonic() - started
    end = outcome["result"].stream_end
    assert isinstance(end, Abandoned)
    abandoned = end.why
    assert "deadline had passed" in abandoned
    # Given up at the deadline plus its grace, before the unreachable bound (1 s here).
    assert "execd had still not said how the command ended 0.6s past its 0.2s budget" in abandoned
    assert execd.pings == 0
    assert 0.8 <= elapsed < loaded(0.8), f"took {elapsed:.2f}s"


def test_a_refused_command_raises_its_error_answer_with_execds_message(execd_with) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps(
            {"code": "INVALID_REQUEST_BODY", "message": "working directory does not exist"}
        )
        handler.send_response(400)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body.encode())

    execd = execd_with(script)
    with pytest.raises(ErrorAnswer) as raised:
        run(execd)
    assert raised.value.status_code == 400 and raised.value.code == "INVALID_REQUEST_BODY"
    assert "working directory does not exist" in str(raised.value)


def test_an_answer_that_is_not_an_event_stream_is_terminal(execd_with) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", "2")
        handler.end_headers()
        handler.wfile.write(b"hi")

    execd = execd_with(script)
    with pytest.raises(SandboxTerminalError, match="not execd"):
        run(execd)


def test_a_stream_that_ends_without_a_terminal_event_is_not_abandoned(execd_with) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, frame("init", COMMAND_ID) + frame("stdout", "last words"))
        handler.wfile.write(b"0\r\n\r\n")

    execd = execd_with(script)
    streamed = run(execd)
    # A stream that ended is no sign of a stuck guest: the sandbox is kept, the end unknown.
    assert isinstance(streamed.stream_end, BrokeEndUnknown)
    assert streamed.stream_end.why.startswith(_execd.ENDED_EARLY)
    assert streamed.ending is None
    assert streamed.parser.stdout.text() == "last words\n"


def test_a_command_stream_is_read_from_the_socket_of_its_own_connection(execd_with) -> None:
    # Read through httpx it would be correct but several times slower: this pins that the
    # transport a sandbox has takes the fast path.
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, complete())
        handler.wfile.write(b"0\r\n\r\n")

    execd = execd_with(script)
    http = SandboxHttp(LoopbackSandbox(execd.port))
    with http.stream(
        "POST", _execd.EXECD_PORT, "/command", "Run command", json={}, own_connection=True
    ) as response:
        assert response.extensions.get(SOCKET_BODY) is not None
        assert b"".join(_http.iter_body(response, NO_HANG)) == complete()


def test_bytes_read_along_with_the_headers_are_not_lost(execd_with) -> None:
    # execd commits its headers with the first event, so the read that brings the headers
    # usually brings events too; those are already inside h11, not on the socket.
    body = frame("init", COMMAND_ID) + frame("stdout", "first") + complete()

    def script(handler: BaseHTTPRequestHandler) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        handler.wfile.write(head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        handler.wfile.flush()
        hold_with_heartbeats(handler)

    streamed = run(execd_with(script))
    assert streamed.parser.stdout.text() == "first\n"
    assert streamed.ending is not None and streamed.ending.exit_code == 0


def test_a_stream_through_a_transport_of_another_kind_is_read_through_httpx() -> None:
    body = frame("stdout", "via httpx") + complete()

    def answer(request: httpx.Request) -> httpx.Response:
        chunks = [body[:10], body[10:]]
        return httpx.Response(
            200,
            headers={"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"},
            stream=httpx.ByteStream(b"".join(chunks)),
        )

    with (
        httpx.Client(transport=httpx.MockTransport(answer)) as client,
        client.stream("POST", "http://execd/command") as response,
    ):
        assert response.extensions.get(SOCKET_BODY) is None
        assert b"".join(_http.iter_body(response, NO_HANG)) == body


def test_a_stream_cut_off_inside_a_chunk_is_a_protocol_error(execd_with) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        handler.wfile.write(b"100\r\n" + frame("stdout", "half"))
        handler.wfile.flush()
        handler.close_connection = True

    execd = execd_with(script)
    http = SandboxHttp(LoopbackSandbox(execd.port))
    with (
        http.stream(
            "POST", _execd.EXECD_PORT, "/command", "Run command", json={}, own_connection=True
        ) as response,
        pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
    ):
        for _ in _http.iter_body(response, NO_HANG):
            pass


def silent_after(data: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    """A script that sends ``data`` and then nothing, holding the stream open."""

    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, data)
        time.sleep(HOLD)

    return script


def dropped_after(data: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    """A script that sends ``data`` and then drops the connection mid-stream."""

    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, data)
        handler.connection.shutdown(2)

    return script


def ended(exit_code: int, error: str = "") -> tuple[int, dict]:
    status = {"id": "id", "running": False, "exit_code": exit_code, "error": error}
    status["started_at"] = "2026-01-01T00:00:00Z"
    status["finished_at"] = "2026-01-01T00:00:01Z"
    return 200, status


RUNNING = (200, {"id": "id", "running": True, "started_at": "2026-01-01T00:00:00Z"})


def test_a_stalled_stream_whose_command_execd_still_knows_returns_its_real_end(
    execd_with,
) -> None:
    # The stream goes silent and the ping unanswered, as through a network blip; execd's
    # status answers, first that the command runs, then how it ended.

    execd = execd_with(
        silent_after(frame("init", COMMAND_ID) + frame("stdout", "before the break"))
    )
    execd.statuses = [RUNNING, RUNNING, ended(7, "exit status 7")]
    outcome = run_in_thread(lambda: run(execd, windows=QUICK))
    assert outcome["returned"]
    streamed = outcome["result"]
    assert isinstance(streamed.stream_end, BrokeEndRecovered)
    assert streamed.ending.exit_code == 7
    assert "sent nothing for 0.5s" in streamed.stream_end.why
    assert streamed.parser.stdout.text() == "before the break\n"
    assert execd.status_requests == [COMMAND_ID] * 3


def test_a_dropped_connection_is_recovered_from_execds_status(execd_with) -> None:
    execd = execd_with(dropped_after(frame("init", COMMAND_ID) + frame("stdout", "partial")))
    execd.statuses = [ended(3, "exit status 3")]
    outcome = run_in_thread(lambda: run(execd))
    assert outcome["returned"]
    streamed = outcome["result"]
    assert isinstance(streamed.stream_end, BrokeEndRecovered)
    assert streamed.ending.exit_code == 3
    assert "the connection broke" in streamed.stream_end.why
    assert streamed.parser.stdout.text() == "partial\n"


def test_a_command_execd_no_longer_knows_ends_without_an_ending(execd_with) -> None:
    # A 404 is execd's "command not found", or the server's for a sandbox that is gone: the
    # caller asks the server which.
    execd = execd_with(dropped_after(frame("init", COMMAND_ID)))
    execd.statuses = [(404, {"code": "INVALID_REQUEST_BODY", "message": "command not found: id"})]
    streamed = run(execd)
    assert isinstance(streamed.stream_end, BrokeEndUnknown) and streamed.ending is None
    assert execd.status_requests == [COMMAND_ID]


def test_a_refused_status_of_a_sandbox_the_server_calls_gone_stops_at_once(execd_with) -> None:
    execd = execd_with(dropped_after(frame("init", COMMAND_ID)))
    execd.statuses = [(502, {})]
    started = time.monotonic()
    streamed = run(execd, gone=lambda: True)
    assert isinstance(streamed.stream_end, BrokeEndUnknown) and streamed.ending is None
    assert time.monotonic() - started < 1.0  # before the unreachable bound
    assert execd.status_requests == [COMMAND_ID]


def test_a_stream_whose_execd_stays_silent_is_given_up_past_the_bound(
    execd_with,
) -> None:
    execd = execd_with(silent_after(frame("init", COMMAND_ID)))
    execd.statuses = [None]  # held: no answer at all
    outcome = run_in_thread(lambda: run(execd, windows=QUICK))
    assert outcome["returned"]
    end = outcome["result"].stream_end
    assert isinstance(end, Abandoned)
    abandoned = end.why
    assert "sent nothing for 0.5s" in abandoned
    assert "answered nothing for 1s" in abandoned


def test_a_stream_that_ended_early_takes_its_end_from_the_status(execd_with) -> None:
    def script(handler: BaseHTTPRequestHandler) -> None:
        event_stream(handler)
        send(handler, frame("init", COMMAND_ID) + frame("stdout", "all of it"))
        handler.wfile.write(b"0\r\n\r\n")

    execd = execd_with(script)
    execd.statuses = [ended(0)]
    streamed = run(execd)
    assert (streamed.stream_end, streamed.ending.exit_code) == (
        BrokeEndRecovered(_execd.ENDED_EARLY),
        0,
    )


def test_a_dropped_connection_no_later_request_gets_past_raises_as_before(execd_with) -> None:
    # The server in between was killed: every status request is refused, and so is the
    # question whether the sandbox still exists. Past the bound the drop is raised, so the
    # backend asks the server about the sandbox, which is terminal when it cannot be reached.
    def server_down() -> bool:
        raise ConnectionRefusedError("the server is down")

    execd = execd_with(dropped_after(frame("init", COMMAND_ID)))
    execd.statuses = [(502, {})]
    started = time.monotonic()
    with pytest.raises(httpx.RemoteProtocolError):
        run(execd, gone=server_down)
    assert time.monotonic() - started >= 1.0  # the unreachable bound, shortened for the test
    assert len(execd.status_requests) > 1


def test_a_server_slow_to_say_whether_the_sandbox_is_gone_does_not_stretch_the_bound(
    execd_with,
) -> None:
    # The server in between is restarting: status requests are refused, and the question
    # whether the sandbox still exists hangs on its socket for as long as the call allows (the
    # SDK's retries, each up to its request timeout, through a lossy link). The recovery still
    # ends at its own bound, not at the command's deadline ten minutes away.
    asked_within: list[float] = []

    def hung_server() -> bool:
        held = _deadline.read_timeout(60.0)  # what a socket read made here may wait
        asked_within.append(held)
        time.sleep(held)
        raise httpx.ReadTimeout("the server did not answer")

    execd = execd_with(dropped_after(frame("init", COMMAND_ID)))
    execd.statuses = [(502, {})]
    outcome = run_in_thread(lambda: run(execd, gone=hung_server))
    assert outcome["returned"], "the recovery waited on the server past its bound"
    assert isinstance(outcome["error"], httpx.RemoteProtocolError)
    assert asked_within and max(asked_within) <= _recovery.STATUS_REQUEST_TIMEOUT


# The stream breaks only after the unreachable bound (1 s here) has passed, as when the ping
# that followed the stall was held for its whole window.
PAST_THE_BOUND = StreamWindows(stall=1.2)


def test_a_break_past_the_bound_still_asks_execd_once_and_recovers(execd_with) -> None:
    # A blip that ended with the ping: the status answers, so the command's real end returns
    # and the sandbox is kept.
    execd = execd_with(silent_after(frame("init", COMMAND_ID)))
    execd.statuses = [ended(5, "exit status 5")]
    outcome = run_in_thread(lambda: run(execd, windows=PAST_THE_BOUND))
    assert outcome["returned"]
    streamed = outcome["result"]
    assert isinstance(streamed.stream_end, BrokeEndRecovered)
    assert streamed.ending.exit_code == 5
    assert execd.status_requests == [COMMAND_ID]


def test_a_break_past_the_bound_whose_last_status_goes_unanswered_is_given_up(
    execd_with, monkeypatch
) -> None:
    # A frozen sandbox: the one last question is held too, and is given up after its own
    # short time, not the status request's full timeout.
    monkeypatch.setattr(_recovery, "LAST_STATUS_TIMEOUT", 0.3)
    monkeypatch.setattr(_recovery, "STATUS_REQUEST_TIMEOUT", 5.0)
    execd = execd_with(silent_after(frame("init", COMMAND_ID)))
    execd.statuses = [None]
    started = time.monotonic()
    streamed = run(execd, windows=PAST_THE_BOUND)
    elapsed = time.monotonic() - started
    assert isinstance(streamed.stream_end, Abandoned)
    assert "answered nothing for 1s" in streamed.stream_end.why
    assert execd.status_requests == [COMMAND_ID]
    assert 1.2 + 0.3 <= elapsed < loaded(1.2 + 0.3)
