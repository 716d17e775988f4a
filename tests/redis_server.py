"""A private Redis for one test session, on a free loopback port in a temporary directory.

The tests' pools live here rather than in the stack's Redis, so two runs sharing one stack never
see each other's pools. It runs the stack's own command line (dev/stack/redis.py).
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dev.stack import redis


@contextmanager
def private_redis(directory: Path) -> Iterator[str]:
    """Run ``redis-server`` until the block ends; yield its URL."""
    port = _free_port()
    log = (directory / "redis.log").open("wb")
    process = subprocess.Popen(
        redis.argv(port, directory, ("127.0.0.1",)), stdout=log, stderr=subprocess.STDOUT
    )
    try:
        redis.wait_answering(port, alive=lambda: process.poll() is None)
        yield redis.url(port)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
