"""A worker that runs one command in an existing sandbox, for a test that breaks its network.

Run inside a :class:`~tests.reliability.worker_namespace.WorkerNamespace` as
``python -m tests.reliability.namespace_worker CONN_ID SANDBOX TIMEOUT COMMAND``, with the
connection in the environment as Airflow reads it. It prints each line of the command's
output as it arrives (``output <stream> <line>``), so the test knows when to break the
network, and at the end the result (``result <json>``) or the error (``error <json>``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time


def main(conn_id: str, sandbox: str, timeout: str, command: str) -> None:
    from opensandbox_provider.sandbox import OpenSandboxBackend

    backend = OpenSandboxBackend(conn_id)

    first_output: list[float] = []

    def show(stream: str, data: bytes) -> None:
        first_output[:] = first_output or [time.monotonic() - started]
        for line in data.decode("utf-8", "replace").splitlines():
            print("output", stream, line, flush=True)

    started = time.monotonic()
    try:
        result = backend.run_command(
            sandbox, command, timeout=float(timeout), max_output_bytes=64 * 1024, on_output=show
        )
    except Exception as e:
        print("error", json.dumps({"type": type(e).__name__, "message": str(e)}), flush=True)
        return
    outcome = {
        **dataclasses.asdict(result),
        "seconds": time.monotonic() - started,
        # When the command's first output arrived: the command had started by then.
        "first_output_seconds": first_output[0] if first_output else None,
    }
    print("result", json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
