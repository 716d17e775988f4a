"""How fast the stand-in itself delivers case (c)'s lines, so the throughput row is about clients.

Two ceilings, on one sandbox: how fast the sandbox produces the bytes (the command with its
output sent to /dev/null, timed inside the sandbox), and how fast execd puts them on the wire as
events to a reader that only counts bytes and parses nothing.
"""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

from benchmarks import workloads
from benchmarks.subjects import SdkSubject

EXECD_PORT = 44772
READ_SIZE = 1 << 20


def _drain(endpoint, command: str) -> tuple[int, float]:
    """POST one command to execd and read its event stream to the end; (wire bytes, seconds)."""
    url = urlsplit(f"http://{endpoint.endpoint}")
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=workloads.LONG_TIMEOUT)
    body = json.dumps({"command": command})
    headers = {
        **endpoint.headers,
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
    }
    started = time.monotonic()
    try:
        connection.request("POST", f"{url.path}/command", body=body, headers=headers)
        response = connection.getresponse()
        received = 0
        while chunk := response.read(READ_SIZE):
            received += len(chunk)
    finally:
        connection.close()
    return received, time.monotonic() - started


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
