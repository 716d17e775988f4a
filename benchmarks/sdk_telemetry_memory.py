"""``python -m benchmarks.sdk_telemetry_memory [REPORTS]``: what the SDK's create telemetry does
to a process's resident memory, and how much of that the C allocator is only keeping.

Unless ``OPENSANDBOX_DISABLE_METRICS=1`` is set, the SDK reports every sandbox create's latency
to the server, from a new thread with a new HTTP client (and TLS context) each time. This makes
those reports alone, ``REPORTS`` of them (2,000 unless given), one after another, to a server on
loopback of this script's own that answers each with 204, and prints the process's resident
memory every 500 reports, and once more at the end after ``malloc_trim(0)`` has given back to
the system what glibc kept freed: what that gives back was memory kept, not memory held
(docs/verification.rst, "Load and soak").
"""

from __future__ import annotations

import ctypes
import sys
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from benchmarks.agent_runs import native_heap, resident_bytes

MIB = 1024 * 1024
EVERY = 500


class _NoContent(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main(reports: int) -> None:
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.internal.lifecycle_metrics import report_sandbox_create_metric

    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoContent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = ConnectionConfigSync(
        domain=f"127.0.0.1:{server.server_port}",
        request_timeout=timedelta(seconds=5),
        disable_metrics=False,
    )
    print("reports  resident MiB  C heap in use MiB  kept free MiB  Python blocks")
    for done in range(reports + 1):
        if done % EVERY == 0 or done == reports:
            # The reports so far have ended: their threads are gone, their memory freed.
            in_use, kept = native_heap() or (0, 0)
            print(
                f"{done:7d}  {resident_bytes() / MIB:12.1f}  {in_use / MIB:17.1f}  "
                f"{kept / MIB:13.1f}  {sys.getallocatedblocks():13d}",
                flush=True,
            )
        if done == reports:
            break
        running = set(threading.enumerate())
        report_sandbox_create_metric(
            config,
            sandbox_id=f"s{done}",
            image="python:3.12-slim",
            create_duration_ms=1,
            success=True,
        )
        for thread in set(threading.enumerate()) - running:
            thread.join()
    ctypes.CDLL(None).malloc_trim(0)
    print(f"after malloc_trim(0): {resident_bytes() / MIB:.1f} MiB resident")
    server.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
