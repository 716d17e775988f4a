"""Runs our resolver (``dev.stack.resolver``) on its address on the bridge, where dockerd
sends containers."""

import os
import socket
import sys
import time

from dev.stack import processes
from dev.stack.engine import RESOLVER_IP
from dev.stack.paths import REPO
from dev.stack.resolver import DEFAULT_ZONE

PORT = 53
PROCESS_NAME = "resolver"
START_SECONDS = 10


def ensure_resolver() -> bool:
    """Starts the resolver unless it runs. True if this call started it.

    Port 53 needs root. Without root the rest of the stack still works, so the resolver's
    failure is then only reported: sandboxes simply cannot resolve names.
    """
    if processes.find(PROCESS_NAME) is not None:
        return False
    zone_args = [arg for name, ip in DEFAULT_ZONE.items() for arg in ("--zone", f"{name}={ip}")]
    argv = [sys.executable, "-m", "dev.stack.resolver", "--bind", RESOLVER_IP]
    argv += ["--port", str(PORT)]
    processes.start(PROCESS_NAME, [*argv, *zone_args], cwd=REPO)
    try:
        _wait_listening()
    except RuntimeError as error:
        processes.stop(PROCESS_NAME)
        if os.geteuid() == 0:
            raise
        print(f"stack: continuing without a resolver. {error}", file=sys.stderr)
        return False
    return True


def stop_resolver() -> bool:
    return processes.stop(PROCESS_NAME)


def _wait_listening() -> None:
    # It serves TCP as well as UDP, and a TCP connect tells "listening" without a DNS exchange.
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            socket.create_connection((RESOLVER_IP, PORT), timeout=0.5).close()
            return
        except OSError:
            if processes.find(PROCESS_NAME) is None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"The resolver did not listen on {RESOLVER_IP}:{PORT}; read its log, "
                    f"{processes.log_file(PROCESS_NAME)}."
                ) from None
            time.sleep(0.1)
