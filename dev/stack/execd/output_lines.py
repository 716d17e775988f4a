"""A foreground command's output files become line events (docs/execd-wire.rst, wire-lines)."""

import re
import threading

from events import EventStream

# Each output file is polled on a 100 ms ticker (docs/execd-wire.rst, wire-lines).
OUTPUT_POLL_INTERVAL = 0.1
# A command can write far more than it is wise to hold at once, so output is read in blocks.
OUTPUT_READ_BLOCK = 1 << 20

_LINE_TERMINATOR = re.compile(rb"[\r\n]")


class LineSplitter:
    """execd's readFromPos. CR, LF and CRLF each end a line, which is emitted without its
    terminator; a terminator with nothing before it is a blank line, emitted as "\\n"; the LF of a
    CRLF is swallowed even when the pair is split between two polls; an unfinished line is held
    until its terminator arrives or the process exits (docs/execd-wire.rst, wire-lines)."""

    def __init__(self):
        self._pending = bytearray()
        self._after_cr = False

    def feed(self, data: bytes) -> list[bytes]:
        if data and b"\r" not in data:
            return self._feed_lf_only(data)
        lines = []
        start = 0
        for match in _LINE_TERMINATOR.finditer(data):
            terminator = data[match.start()]
            self._pending += data[start : match.start()]
            if self._pending:
                lines.append(bytes(self._pending))
                self._pending.clear()
            elif not (terminator == ord("\n") and self._after_cr):
                lines.append(b"\n")
            self._after_cr = terminator == ord("\r")
            start = match.end()
        if start < len(data):
            self._pending += data[start:]
            self._after_cr = False
        return lines

    def _feed_lf_only(self, data: bytes) -> list[bytes]:
        """The same rules, cut at C speed for the common block with no CR: a chatty command's
        output is millions of lines, and a regex match per line would make this stand-in, not
        the client reading it, the slowest part of every throughput measurement."""
        lines = data.split(b"\n")
        rest = lines.pop()
        if lines:
            first = bytes(self._pending) + lines[0]
            self._pending.clear()
            # An empty first line is the LF of a CRLF split between two polls, or a blank line.
            if first or not self._after_cr:
                lines[0] = first
            else:
                del lines[0]
            self._after_cr = False
            lines = [line or b"\n" for line in lines]
        if rest:
            self._pending += rest
            self._after_cr = False
        return lines

    def flush(self) -> list[bytes]:
        """At exit an unfinished last line is emitted as it is (docs/execd-wire.rst, wire-lines)."""
        rest = bytes(self._pending)
        self._pending.clear()
        return [rest] if rest else []


class OutputTailer:
    """Polls one output file every 100 ms and emits each complete line as an event; a final
    read after the process has exited flushes the rest (docs/execd-wire.rst, wire-lines)."""

    def __init__(self, path: str, kind: str, stream: EventStream):
        self._path = path
        self._kind = kind
        self._stream = stream
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        splitter = LineSplitter()
        with open(self._path, "rb") as output:
            while not self._done.wait(OUTPUT_POLL_INTERVAL):
                self._emit_new_lines(output, splitter)
            self._emit_new_lines(output, splitter)
            self._emit(splitter.flush())

    def _emit_new_lines(self, output, splitter: LineSplitter) -> None:
        while block := output.read(OUTPUT_READ_BLOCK):
            self._emit(splitter.feed(block))

    def _emit(self, lines: list[bytes]) -> None:
        if lines:
            self._stream.send_lines(self._kind, lines)
