"""How fast the stand-in itself delivers case (c)'s lines, so the throughput row is about clients.

Two ceilings, on one sandbox: how fast the sandbox produces the bytes (the command with its
output sent to /dev/null, timed inside the sandbox), and how fast execd puts them on the wire as
events to a reader that only counts the bytes on the socket and decodes nothing.
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


def _drain(endpoint, command: str) -> tuple[int, float]:
    """POST one command to execd and count its answer's bytes; (bytes, seconds to its end).

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
    with socket.create_connection((url.hostname, url.port), timeout=workloads.LONG_TIMEOUT) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        received = 0
        seen = b""
        while chunk := sock.recv(READ_SIZE):
            received += len(chunk)
            seen = seen[-len(TERMINAL) :] + chunk
            # Timed to the terminal event, not to the last chunk about a second later
            # (docs/execd-wire.rst, wire-grace), which is execd's delay rather than its rate.
            if ended is None and TERMINAL in seen:
                ended = time.monotonic()
            if seen.endswith(LAST_CHUNK):
                break
    return received, (ended or time.monotonic()) - started


def measure(sdk: SdkSubject) -> dict:
    handle = sdk.create()
    try:
        sandbox = sdk.sandboxes[handle]
        execution = sandbox.commands.run(workloads.GENERATOR_COMMAND)
        generator_seconds = float(execution.logs.stdout[-1].text)
        wire_bytes, wire_seconds = _drain(sandbox.get_endpoint(EXECD_PORT), workloads.LINES_COMMAND)
    finally:
        sdk.destroy(handle)
    return {
        "generator_mb_per_s": workloads.LINES_BYTES / 1e6 / generator_seconds,
        "wire_mb_per_s": workloads.LINES_BYTES / 1e6 / wire_seconds,
        "wire_bytes": wire_bytes,
        "wire_s": wire_seconds,
    }
