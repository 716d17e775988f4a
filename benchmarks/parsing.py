"""How fast the event parser alone reads the two shapes of output, in this process, no stack.

Lines of plain text take the parser's fast path; one long line of minified JSON, whose event
escapes a quote every few bytes, takes the path for escaped text. Both are fed as the socket
reads them, so the rates are the worker CPU a command's output costs, with nothing of execd's.
"""

from __future__ import annotations

import json
import time

from benchmarks import workloads
from opensandbox_provider._exchange import BODY_READ_SIZE
from opensandbox_provider.execd._events import EventParser

# Enough of each shape to read for a second or so, past the parser's first megabyte.
PARSED_BYTES = 100_000_000
# A record as a program prints one with compact separators; each quote becomes \" in the event.
RECORD = {"id": 12345, "name": "sensor-7", "tags": ["a", "b"], "ok": True, "value": 1.5}
_END = b'{"type":"execution_complete","timestamp":2,"execution_time":1}\n\n'


def _event(text: str) -> bytes:
    return json.dumps({"type": "stdout", "text": text, "timestamp": 1}).encode() + b"\n\n"


def plain_lines() -> bytes:
    line = _event(workloads.LINE)
    return line * (PARSED_BYTES // len(line))


def minified_json_line() -> bytes:
    record = json.dumps(RECORD, separators=(",", ":"))
    return _event(record * (PARSED_BYTES // len(record)))


def mb_per_s(stream: bytes) -> float:
    """The parser's rate on ``stream`` at the toolset's default cap, best of three."""
    best = float("inf")
    for _ in range(3):
        parser = EventParser(workloads.CAP)
        started = time.perf_counter()
        for start in range(0, len(stream), BODY_READ_SIZE):
            parser.feed(stream[start : start + BODY_READ_SIZE])
        parser.feed(_END)
        best = min(best, time.perf_counter() - started)
        if parser.ending is None:
            raise RuntimeError("the parser did not reach the terminal event")
    return len(stream) / best / 1e6


def measure() -> dict:
    return {
        "plain_mb_per_s": mb_per_s(plain_lines()),
        "escaped_mb_per_s": mb_per_s(minified_json_line()),
    }
