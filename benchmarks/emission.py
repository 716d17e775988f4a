"""How fast execd itself delivers case (c)'s lines, so the throughput row is about clients.

Two ceilings, on one sandbox: how fast the sandbox produces the bytes (the command with its
output sent to /dev/null, timed inside the sandbox), and how fast execd (the stand-in or the
real one, whichever the stack runs) puts them on the wire as events to a reader that only counts
the bytes on the socket and decodes nothing. And, on a sandbox of its own, the longest silence
execd leaves on the wire while it sends one huge line: the stall window must stay clear of it.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

from benchmarks import workloads
from benchmarks.subjects import SdkSubject

EXECD_PORT = 44772
READ_SIZE = 1 << 20
TERMINAL = b'"type":"execution_complete"'
LAST_CHUNK = b"\r\n0\r\n\r\n"


def _drain(endpoint, command: str) -> tuple[int, float, float]:
    """POST one command to execd and count its answer's bytes; (bytes, seconds to its end, the
    longest time between two reads before the end).

    The socket is read as it is, chunk framing and all: any HTTP client's decoding would make
    this a measure of the client. The answer ends with the zero-size last chunk, recognised by
    its bytes at the end of what has arrived: execd writes it last, after the terminal event.
    """
    url = urlsplit(f"http://{endpoint.endpoint}")
    body = json.dumps({"command": command}).encode()
    headers = {
        **endpoint.headers,
        "Host": url.netloc,
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "Content-Length": str(len(body)),
    }
    head = f"POST {url.path}/command HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()
    )
    started = time.monotonic()
    ended = None
    last_read, longest_gap = started, 0.0
    with socket.create_connection((url.hostname, url.port), timeout=workloads.LONG_TIMEOUT) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        received = 0
        seen = b""
        while chunk := sock.recv(READ_SIZE):
            now = time.monotonic()
            if ended is None:
                longest_gap, last_read = max(longest_gap, now - last_read), now
            received += len(chunk)
            seen = seen[-len(TERMINAL) :] + chunk
            # Timed to the terminal event, not to the last chunk about a second later
            # (docs/execd-wire.rst, wire-grace), which is execd's delay rather than its rate.
            if ended is None and TERMINAL in seen:
                ended = time.monotonic()
            if seen.endswith(LAST_CHUNK):
                break
    return received, (ended or time.monotonic()) - started, longest_gap


def measure(sdk: SdkSubject, roomy_sdk: SdkSubject) -> dict:
    """``roomy_sdk`` makes sandboxes with room for execd to hold the huge line."""
    handle = sdk.create()
    try:
        sandbox = sdk.sandboxes[handle]
        execution = sandbox.commands.run(workloads.GENERATOR_COMMAND)
        generator_seconds = float(execution.logs.stdout[-1].text)
        endpoint = sandbox.get_endpoint(EXECD_PORT)
        wire_bytes, wire_seconds, _ = _drain(endpoint, workloads.LINES_COMMAND)
    finally:
        sdk.destroy(handle)
    handle = roomy_sdk.create()
    try:
        endpoint = roomy_sdk.sandboxes[handle].get_endpoint(EXECD_PORT)
        command = workloads.no_newline_command(workloads.NO_NEWLINE_BYTES)
        _, huge_line_seconds, huge_line_gap = _drain(endpoint, command)
    finally:
        roomy_sdk.destroy(handle)
    return {
        "generator_mb_per_s": workloads.LINES_BYTES / 1e6 / generator_seconds,
        "wire_mb_per_s": workloads.LINES_BYTES / 1e6 / wire_seconds,
        "wire_bytes": wire_bytes,
        "wire_s": wire_seconds,
        "huge_line_s": huge_line_seconds,
        "huge_line_gap_s": huge_line_gap,
    }
