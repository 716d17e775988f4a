"""
HTTP/1.1's chunked transfer coding, decoded a socket read at a time rather than a chunk at a time.

execd sends every event as a chunk of about 150 bytes (docs/execd-wire.rst, wire-framing), and at
several microseconds a chunk httpx's one-by-one handling, not the event parsing, capped the line
rate. This strips the framing of whatever a read brought in a few passes at C speed, decoding
one chunk at a time, by the same rules, only what the bulk pass cannot vouch for. It is pure and
holds at most one chunk-size line, so a 1 GiB chunk streams through in pieces as small as reads.
"""

from __future__ import annotations

import re
from itertools import repeat

import httpx

CRLF = b"\r\n"
# A chunk-size line with its extensions; RFC 9112 sets no limit, and h11 allows a few hundred
# bytes. Nothing that sends far more than this without a CRLF is speaking HTTP.
MAX_SIZE_LINE = 4096
# The bulk pass pays a split of the whole read, so it is tried only where it can win.
_BULK_MIN_BYTES = 4096
_HEX_DIGITS = b"0123456789abcdefABCDEF"
_SIZE = re.compile(rb"[ \t]*([0-9A-Fa-f]+)[ \t]*(?:;.*)?")


class ChunkedDecoder:
    """
    Turns a chunked body, fed in any split, into the bytes it carries. :attr:`done` is set at
    the last (zero-size) chunk, after which nothing is read: the trailer section is never wanted
    here, and the connection is closed rather than reused.
    """

    def __init__(self) -> None:
        self.done = False
        self._held = b""
        # Bytes of the current chunk's data still to come; then its CRLF is.
        self._in_chunk = 0
        self._after_data = False

    def feed(self, data: bytes) -> bytes:
        buffer = self._held + data if self._held else data
        body: list[bytes] = []
        position = 0
        bulk = len(buffer) >= _BULK_MIN_BYTES
        while position < len(buffer) and not self.done:
            if self._in_chunk:
                end = min(position + self._in_chunk, len(buffer))
                body.append(buffer[position:end])
                self._in_chunk -= end - position
                position = end
                self._after_data = not self._in_chunk
            elif self._after_data:
                if len(buffer) - position < len(CRLF):
                    break
                if buffer[position : position + 2] != CRLF:
                    raise httpx.RemoteProtocolError("chunk data was not followed by CRLF")
                position += len(CRLF)
                self._after_data = False
            else:
                if bulk:
                    whole, after = _whole_chunks(buffer, position)
                    if whole:
                        body.append(whole)
                        position = after
                        continue
                    # Once per feed: trying again after every chunk would split the same
                    # bytes over and over.
                    bulk = False
                line_end = buffer.find(CRLF, position)
                if line_end < 0:
                    if len(buffer) - position > MAX_SIZE_LINE:
                        raise httpx.RemoteProtocolError("chunk-size line too long")
                    break
                size = _chunk_size(buffer[position:line_end])
                position = line_end + len(CRLF)
                if size == 0:
                    self.done = True
                self._in_chunk = size
        self._held = b"" if self.done else buffer[position:]
        return b"".join(body)


def _whole_chunks(buffer: bytes, position: int) -> tuple[bytes, int]:
    """
    The data of the complete chunks from ``position`` on, and where they end.

    Splitting at every CRLF gives size line, data, size line, data, ... as long as no
    chunk's data holds a CRLF itself. The pairs are trusted only as far as every size
    matches its data's length: the first chunk whose data does hold a CRLF comes out shorter
    than its size says, and the run stops before it. Stops before the last chunk, too.
    """
    parts = buffer[position:].split(CRLF)
    pairs = (len(parts) - 1) // 2
    sizes = parts[0 : 2 * pairs : 2]
    datas = parts[1 : 2 * pairs : 2]
    if not all(sizes) or b"".join(sizes).translate(None, _HEX_DIGITS):
        # A chunk extension, or not a chunk-size line at all: left to the exact path.
        return b"", position
    lengths = list(map(int, sizes, repeat(16)))
    found = list(map(len, datas))
    if lengths != found:
        pairs = next(
            index
            for index, (size, length) in enumerate(zip(lengths, found, strict=True))
            if size != length
        )
    if 0 in lengths[:pairs]:
        pairs = lengths.index(0)
    if not pairs:
        return b"", position
    framing = sum(map(len, sizes[:pairs])) + 2 * len(CRLF) * pairs
    return b"".join(datas[:pairs]), position + framing + sum(lengths[:pairs])


def _chunk_size(line: bytes) -> int:
    match = _SIZE.fullmatch(line)
    if match is None:
        raise httpx.RemoteProtocolError(f"not a chunk-size line: {line[:64]!r}")
    return int(match.group(1), 16)
