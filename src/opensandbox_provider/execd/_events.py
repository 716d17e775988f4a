"""
execd's command event stream, parsed incrementally into byte-bounded output.

One compact JSON event per output line, each followed by a blank line
(docs/execd-wire.rst, wire-framing, wire-lines), and nothing bounds a line: 1 GiB printed with
no newline is one 1 GiB event. So frames up to :data:`MAX_WHOLE_FRAME` are parsed whole, and a
longer one's text is read as it streams, keeping only what the stream's tail can still use. The
parser does no I/O, so it can be tested with any split of the stream.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

SEPARATOR = b"\n\n"
# The longest frame parsed in one piece. Output lines are rarely longer; a longer frame is
# read as a stream, so this also bounds what one frame can hold in memory.
MAX_WHOLE_FRAME = 1024 * 1024
# Every byte of output arrives as at most six bytes of JSON (``\u0000``), so this many raw
# bytes always decode to at least the bytes a tail of ``max_bytes`` keeps.
_ESCAPE_EXPANSION = 6
# Where an event's error text can run long (a hostile daemon), only this much is kept.
_MAX_ERROR_TEXT = 4096
# The start of an output frame, up to the opening quote of its text: execd's encoder writes
# "type" first and "text" second (docs/execd-wire.rst, wire-events). SSE's "data:" prefix is
# allowed, since the SDK accepts that framing too.
_OUTPUT_FRAME_HEAD = re.compile(
    rb'\s*(?:data:[ \t]?)?\{\s*"type"\s*:\s*"(stdout|stderr)"\s*,\s*"text"\s*:\s*"'
)
# An exit status is a Go int: a longer run of digits is not one, and Python would refuse to
# convert one of thousands.
_STATUS = re.compile(r"\s*-?\d{1,19}\s*")

# A frame exactly as execd writes an output line or a heartbeat whose text is printable ASCII
# without a quote or a backslash, so that its JSON text is the text itself
# (docs/execd-wire.rst, wire-events). Nearly every frame of a chatty command is one; a run of
# nothing else is parsed with two scans at C speed.
_PLAIN_FRAME = rb'\{"type":"(?:stdout|stderr|ping)","text":"[ !#-\[\]-~]+","timestamp":[0-9]+\}'
_PLAIN_FRAMES = re.compile(rb"(?:" + _PLAIN_FRAME + rb"\n\n)*+" + _PLAIN_FRAME)
_PLAIN_TEXTS = {
    kind: re.compile(rb'\{"type":"' + kind + rb'","text":"([^"]*)"')
    for kind in (b"stdout", b"stderr")
}


class BoundedTail:
    """
    The last ``max_bytes`` bytes appended, with whether anything before them was dropped;
    ``sink`` is handed every piece as it is appended, so output shows while the command runs.
    """

    def __init__(self, max_bytes: int, sink: Callable[[bytes], None] | None = None) -> None:
        self.max_bytes = max_bytes
        self.total = 0
        self._dropped = False
        self._data = bytearray()
        self._sink = sink

    def append(self, data: bytes) -> None:
        self.total += len(data)
        if self._sink is not None:
            self._sink(data)
        if len(data) >= self.max_bytes:
            self._data[:] = data[-self.max_bytes :]
            return
        self._data += data
        # Trimmed only once it has doubled, so appending many short lines costs a copy of
        # the tail now and then rather than once per line.
        if len(self._data) > 2 * self.max_bytes:
            del self._data[: len(self._data) - self.max_bytes]

    def mark_dropped(self) -> None:
        """Record that bytes were dropped before they reached :meth:`append`."""
        self._dropped = True

    @property
    def truncated(self) -> bool:
        return self._dropped or self.total > self.max_bytes

    @property
    def counted(self) -> bool:
        """Whether :attr:`total` is every byte the stream carried, not only what reached it."""
        return not self._dropped

    def text(self) -> str:
        # A cut can split a multi-byte character; its remains are dropped, not replaced.
        return bytes(self._data[-self.max_bytes :]).decode("utf-8", errors="ignore")


@dataclass(frozen=True)
class Ending:
    """
    How execd said the command ended: its terminal event. ``exit_code`` is ``None`` for a
    failure with no numeric status (a command that could not start), and -1, Go's code for a
    process ended by a signal, for one killed at its deadline too.
    """

    exit_code: int | None
    message: str = ""

    @classmethod
    def from_event(cls, event: dict) -> Ending:
        if event.get("type") == "execution_complete":
            return cls(exit_code=0)
        error = event.get("error")
        if not isinstance(error, dict):
            return cls(exit_code=None)
        value = error.get("evalue")
        value = value if isinstance(value, str) else ""
        traceback = error.get("traceback")
        lines = (
            [line for line in traceback if isinstance(line, str)]
            if isinstance(traceback, list)
            else []
        )
        message = ("\n".join(lines) or value)[:_MAX_ERROR_TEXT]
        exit_code = int(value) if _STATUS.fullmatch(value) else None
        return cls(exit_code=exit_code, message=message)


class EventParser:
    """
    Reads execd's event stream as it arrives, keeping each output stream to a byte budget.

    :meth:`feed` takes bytes in any split, :meth:`close` the stream's end. Once :attr:`ending`
    is set, what is fed is ignored: execd sends no output after its terminal event
    (docs/execd-wire.rst, wire-ordering). ``on_output`` is handed ``"stdout"`` or ``"stderr"``
    and each piece of that stream's output as it is parsed, before it is bounded.
    """

    def __init__(
        self, max_output_bytes: int, on_output: Callable[[str, bytes], None] | None = None
    ) -> None:
        self.stdout, self.stderr = (
            BoundedTail(max_output_bytes, on_output and partial(on_output, stream))
            for stream in ("stdout", "stderr")
        )
        self.command_id: str | None = None
        self.ending: Ending | None = None
        self._pending = bytearray()
        self._long: _LongText | _Skipped | None = None

    def feed(self, data: bytes) -> None:
        while data and self.ending is None:
            if self._long is not None:
                data = self._long.feed(data)
                if not self._long.done:
                    return
                self._long = None
                continue
            searched = max(0, len(self._pending) - 1)
            self._pending += data
            data = b""
            end = self._pending.rfind(SEPARATOR, searched)
            if end >= 0:
                block = bytes(self._pending[:end])
                del self._pending[: end + len(SEPARATOR)]
                self._parse_frames(block)
            if len(self._pending) > MAX_WHOLE_FRAME and self.ending is None:
                data = self._start_long_frame()

    def _start_long_frame(self) -> bytes:
        """Read the frame in ``_pending`` as a stream; return what is left to feed it."""
        head = bytes(self._pending)
        self._pending.clear()
        match = _OUTPUT_FRAME_HEAD.match(head)
        if match is None:
            # Not an output line: no frame execd sends is this long.
            self._long = _Skipped()
            return head
        self._long = _LongText(self.stdout if match.group(1) == b"stdout" else self.stderr)
        return head[match.end() :]

    def close(self) -> None:
        """The stream ended; a last frame without its separator still counts, as for the SDK."""
        if self._long is not None:
            self._long.flush()
            self._long = None
        elif self.ending is None and self._pending.strip():
            block = bytes(self._pending)
            self._pending.clear()
            self._parse_frames(block)

    def _parse_frames(self, block: bytes) -> None:
        if _PLAIN_FRAMES.fullmatch(block):
            self._take_plain(block)
            return
        try:
            # One parse for every frame that arrived together: execd's frames are compact
            # JSON, which never holds a raw newline, so the separators can become commas.
            events = json.loads(b"[" + block.replace(SEPARATOR, b",") + b"]")
        except (ValueError, RecursionError):
            events = [
                event for frame in block.split(SEPARATOR) if (event := self._parse_frame(frame))
            ]
        self._take(events)

    def _take_plain(self, block: bytes) -> None:
        """What :meth:`_take` would make of frames that all match ``_PLAIN_FRAME``."""
        for tail, kind in ((self.stdout, b"stdout"), (self.stderr, b"stderr")):
            # A plain search is far faster than the regex's; most blocks hold one stream only.
            if b'"type":"' + kind not in block:
                continue
            texts = _PLAIN_TEXTS[kind].findall(block)
            tail.append(b"\n".join(texts) + b"\n")

    def _parse_frame(self, frame: bytes) -> object:
        payload = _sse_data(frame)
        if not payload.strip():
            return None
        try:
            return json.loads(payload)
        except (ValueError, RecursionError):
            # Not JSON, or JSON nested deeper than Python parses: no event execd sends.
            return None

    def _take(self, events: list) -> None:
        stdout: list[str] = []
        stderr: list[str] = []
        for event in events:
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            if kind == "stdout" or kind == "stderr":
                text = event.get("text")
                if isinstance(text, str) and text:
                    (stdout if kind == "stdout" else stderr).append(text)
            elif kind == "execution_complete" or kind == "error":
                self.ending = Ending.from_event(event)
                break
            elif kind == "init" and isinstance(event.get("text"), str):
                self.command_id = event["text"]
        if stdout:
            self.stdout.append(_restore_lines(stdout))
        if stderr:
            self.stderr.append(_restore_lines(stderr))


def _restore_lines(texts: list[str]) -> bytes:
    # execd strips each line's terminator and sends a blank line as "\n"
    # (docs/execd-wire.rst, wire-lines), so the terminator goes back on every line that is not one
    # already. Lines that ended in "\r" or "\r\n" come back ending in "\n": the event no longer says
    # which it was.
    return "".join(text if text == "\n" else text + "\n" for text in texts).encode(
        "utf-8", "replace"
    )


def _sse_data(frame: bytes) -> bytes:
    """The payload of a frame: the frame itself, or the joined ``data:`` lines of an SSE event."""
    if not frame.lstrip().startswith(b"data:"):
        return frame
    lines = [
        line[5:].removeprefix(b" ") for line in frame.split(b"\n") if line.startswith(b"data:")
    ]
    return b"\n".join(lines)


class _Skipped:
    """The rest of a frame that is not read, up to the separator that ends it."""

    def __init__(self) -> None:
        self._last = b""
        self.done = False

    def feed(self, data: bytes) -> bytes:
        """Consume ``data`` up to the end of the frame and return what follows it."""
        # The separator may straddle two reads, so the last byte seen is looked at again.
        probe = self._last + data
        end = probe.find(SEPARATOR)
        if end < 0:
            self._last = probe[-1:]
            return b""
        self.done = True
        return probe[end + len(SEPARATOR) :]

    def flush(self) -> None:
        """Nothing of a skipped frame is kept."""


class _LongText:
    """
    The text of an output frame longer than :data:`MAX_WHOLE_FRAME`, read as it streams: kept
    as a window of its raw JSON, never much over twice what the stream's tail can use, decoded
    once it ends; the rest of the frame is skipped.
    """

    def __init__(self, tail: BoundedTail) -> None:
        self._tail = tail
        self._keep = _ESCAPE_EXPANSION * tail.max_bytes + 16
        self._raw = bytearray()
        self._searched = 0
        self._rest: _Skipped | None = None

    @property
    def done(self) -> bool:
        return self._rest is not None and self._rest.done

    def feed(self, data: bytes) -> bytes:
        """Consume ``data`` up to the end of the frame and return what follows it."""
        if self._rest is not None:
            return self._rest.feed(data)
        self._raw += data
        text_end = self._string_end()
        if text_end < 0:
            if len(self._raw) > 2 * self._keep:
                self._drop_head(len(self._raw) - self._keep)
            return b""
        after = bytes(self._raw[text_end + 1 :])
        del self._raw[text_end:]
        if len(self._raw) > self._keep:
            self._drop_head(len(self._raw) - self._keep)
        self._tail.append(_decode_json_text(bytes(self._raw)) + b"\n")
        self._raw.clear()
        self._rest = _Skipped()
        return self._rest.feed(after)

    def flush(self) -> None:
        """Keep the text read so far of a frame the stream ended inside."""
        if self._rest is not None:
            return
        # The stream may have stopped inside an escape sequence; back off until the text decodes.
        for end in range(len(self._raw), max(-1, len(self._raw) - 13), -1):
            try:
                text = json.loads(b'"' + bytes(self._raw[:end]) + b'"')
            except ValueError:
                continue
            self._tail.append(text.encode("utf-8", "replace"))
            return

    def _string_end(self) -> int:
        """Where the text's closing quote is, or -1: the first quote not escaped by a backslash."""
        # From a place no escape straddles, pairing backslashes left to right is how JSON reads
        # them, so once every escaped backslash and then every escaped quote is masked, the first
        # quote left ends the text: three passes at C speed, however densely the text is escaped
        # (minified JSON printed on one line escapes a quote every few bytes).
        unread = bytes(self._raw[self._searched :])
        masked = unread.replace(b"\\\\", b"__").replace(b'\\"', b"__")
        quote = masked.find(b'"')
        if quote >= 0:
            return self._searched + quote
        # An odd run of backslashes at the end escapes a byte still to come: it is read again.
        trailing = len(unread) - len(unread.rstrip(b"\\"))
        self._searched += len(unread) - trailing % 2
        return -1

    def _drop_head(self, at_least: int) -> None:
        cut = _clean_cut(self._raw, at_least)
        del self._raw[:cut]
        self._searched = max(0, self._searched - cut)
        self._tail.mark_dropped()


def _backslashes_before(raw: bytearray, position: int) -> int:
    """How many backslashes run up to ``position``, counted at C speed even for a long run."""
    window = 64
    while True:
        start = max(0, position - window)
        before = bytes(raw[start:position])
        count = len(before) - len(before.rstrip(b"\\"))
        if count < len(before) or start == 0:
            return count
        window *= 4


_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


def _clean_cut(raw: bytearray, position: int) -> int:
    """
    The first place at or after ``position`` where a JSON string's text can be cut so the rest
    decodes on its own: not inside an escape sequence (``\\n``, ``\\u00e9``) nor a UTF-8
    character. ``raw`` starts at such a place, which makes counting backslashes back exact.
    """
    if _backslashes_before(raw, position) % 2:
        position += 5 if raw[position : position + 1] == b"u" else 1
    else:
        for back in range(1, 5):
            at = position - back
            if at < 1 or raw[at] == 0x75:
                # An escaped "u" a few bytes back means the cut fell among its hex digits.
                if at >= 1 and _backslashes_before(raw, at) % 2:
                    position = at + 5
                break
            if raw[at] not in _HEX_DIGITS:
                break
    while position < len(raw) and 0x80 <= raw[position] < 0xC0:
        position += 1
    return min(position, len(raw))


def _decode_json_text(raw: bytes) -> bytes:
    """The UTF-8 bytes a JSON string's text stands for; undecodable text is kept as it came."""
    try:
        return json.loads(b'"' + raw + b'"').encode("utf-8", "replace")
    except ValueError:
        return raw.decode("utf-8", "replace").encode("utf-8")
