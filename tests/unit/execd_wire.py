"""execd's event stream as bytes on the wire (docs/execd-wire.rst, wire-framing, wire-events), for
tests to feed."""

from __future__ import annotations

import json


def frame(kind: str, text: str | None = None, **fields: object) -> bytes:
    """One event as execd writes it: compact JSON, then a blank line
    (docs/execd-wire.rst, wire-framing)."""
    event: dict[str, object] = {"type": kind}
    if text is not None:
        event["text"] = text
    event.update(fields)
    event["timestamp"] = 1795977030880
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def complete() -> bytes:
    return frame("execution_complete", execution_time=2)


def failed(value: str, *traceback: str) -> bytes:
    error = {"ename": "CommandExecError", "evalue": value, "traceback": list(traceback)}
    return frame("error", error=error)


# An id of the form execd gives a command (docs/execd-wire.rst, wire-command-id).
COMMAND_ID = "0f3c9a2e5b7d41c8a6e2f0b9d3c7a514"
