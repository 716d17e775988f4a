"""The command event stream of POST /command: events, their framing and the heartbeat
(docs/execd-wire.rst, wire-framing, wire-events, wire-ping)."""

import itertools
import threading
import time

from exchange import Exchange
from go_encoding import go_json, go_string
from stall import STALL

HEARTBEAT_INTERVAL = 3.0  # (docs/execd-wire.rst, wire-ping)

# Printable ASCII that Go's encoder writes as it is: everything but ", \, <, > and &
# (docs/execd-wire.rst, wire-framing).
_PLAIN_JSON_BYTES = bytes(byte for byte in range(0x20, 0x7F) if byte not in b'"\\<>&')

# The headers execd commits with the first event (docs/execd-wire.rst, wire-framing).
EVENT_STREAM_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}


def stream_event(
    kind: str, *, text: str = "", execution_time: int = 0, error: dict | None = None
) -> dict:
    """Go's ServerStreamEvent, keys in its field order, zero values omitted (omitempty)
    (docs/execd-wire.rst, wire-events)."""
    event = {"type": kind}
    if text:
        event["text"] = text
    if execution_time:
        event["execution_time"] = execution_time
    # Unix milliseconds (docs/execd-wire.rst, wire-events).
    event["timestamp"] = time.time_ns() // 1_000_000
    if error:
        event["error"] = error
    return event


def error_event(value: str, text: str) -> dict:
    """ename is always CommandExecError; ename, evalue and traceback are never omitted
    (docs/execd-wire.rst, wire-exit)."""
    return stream_event(
        "error", error={"ename": "CommandExecError", "evalue": value, "traceback": [text]}
    )


def _frame(event: dict) -> bytes:
    """Compact JSON and a blank line (docs/execd-wire.rst, wire-framing)."""
    return go_json(event) + b"\n\n"


class EventStream:
    """One /command response: frames of compact JSON plus "\\n\\n" on a chunked 200 body
    (docs/execd-wire.rst, wire-framing)."""

    def __init__(self, exchange: Exchange):
        self._exchange = exchange
        self._lock = threading.Lock()  # execd serializes writes with a mutex
        self._committed = False
        self._client_gone = False
        self._events_sent = 0
        STALL.stream_opened()

    def send(self, event: dict) -> None:
        self.send_all([event])

    def send_all(self, events: list[dict]) -> None:
        """Events in order, each its own frame and chunk, written together."""
        # Encoding happens before the lock is taken: a huge line takes seconds to encode, and the
        # heartbeat must not wait for it.
        self._send([event["type"] for event in events], [_frame(event) for event in events])

    def send_lines(self, kind: str, lines: list[bytes]) -> None:
        """One output event per line, as send_all would write them, encoded in bulk
        (docs/execd-wire.rst, wire-lines)."""
        # One timestamp per batch: the lines came from one read of the output file, and execd,
        # which stamps each as it sends it, gets through such a read in a few milliseconds.
        tail = b'","timestamp":%d}\n\n' % (time.time_ns() // 1_000_000)
        head = b'{"type":"%s","text":"' % kind.encode()
        # A line of plain ASCII is its own JSON text, so its frame is three pieces joined;
        # anything else goes through the encoder.
        frames = [
            head + line + tail
            if not line.translate(None, _PLAIN_JSON_BYTES)
            else _frame(stream_event(kind, text=go_string(line)))
            for line in lines
        ]
        self._send(itertools.repeat(kind, len(frames)), frames)

    def _send(self, kinds, frames: list[bytes]) -> None:
        with self._lock:
            if STALL.active:
                passed = []
                for kind, frame in zip(kinds, frames, strict=True):
                    if STALL.lets_through(kind, self._events_sent):
                        self._events_sent += 1
                        passed.append(frame)
                frames = passed
            else:
                self._events_sent += len(frames)
            if frames:
                self._write(frames)

    def append_raw(self, body: bytes) -> None:
        """A failure after init is appended raw to the 200 stream, without "\\n\\n"
        (docs/execd-wire.rst, wire-sequences)."""
        with self._lock:
            self._write([body])

    def _write(self, payloads: list[bytes]) -> None:
        # Once the client is gone nothing is written, but the command is not disturbed
        # (docs/execd-wire.rst, wire-disconnect).
        if self._client_gone:
            return
        try:
            if not self._committed:
                # Headers are committed lazily, so a failure before the first event can
                # still be answered as a plain JSON error (docs/execd-wire.rst, wire-framing).
                self._exchange.start_chunked(200, EVENT_STREAM_HEADERS)
                self._committed = True
            self._exchange.write_chunks(payloads)
        except OSError:
            self._client_gone = True

    def end(self) -> None:
        if STALL.active:
            # Test-only: a stalled stream never ends; the client has to give up on it.
            self._exchange.wait_for_client_to_hang_up()
            self._exchange.close_connection()
            STALL.stream_closed()
            return
        with self._lock:
            if self._client_gone:
                self._exchange.close_connection()
                return
            try:
                self._exchange.end_chunked()
            except OSError:
                self._exchange.close_connection()


class Heartbeat:
    """A ping right after init, then every 3 s, until the handler returns
    (docs/execd-wire.rst, wire-ping)."""

    def __init__(self, stream: EventStream):
        self._stream = stream
        self._stopped = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._stream.send(stream_event("ping", text="pong"))
            self._stopped.wait(HEARTBEAT_INTERVAL)

    def stop(self) -> None:
        self._stopped.set()
