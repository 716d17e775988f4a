"""Runs Redis, where warm pools keep their idle sandboxes for every worker (docs/pools.rst).

It listens on loopback, for the workers and keepers on this machine, and on the Docker bridge,
for one running in a container; nowhere else. It keeps nothing on disk: a pool's state is
rebuilt by its keeper, and an idle sandbox the state forgot expires by its lease.
"""

import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dev.stack import processes
from dev.stack.engine import BRIDGE_IP
from dev.stack.paths import STACK_DIR

PORT = 18099
PROCESS_NAME = "redis"
DATA_DIR = STACK_DIR / "redis"
START_SECONDS = 10


def ensure_redis() -> bool:
    """Starts the stack's Redis unless it runs. True if this call started it."""
    if processes.find(PROCESS_NAME) is not None:
        return False
    processes.start(PROCESS_NAME, argv(PORT, DATA_DIR, ("127.0.0.1", BRIDGE_IP)))
    try:
        wait_answering(PORT, alive=lambda: processes.find(PROCESS_NAME) is not None)
    except RuntimeError:
        processes.stop(PROCESS_NAME)
        raise
    return True


def stop_redis() -> bool:
    return processes.stop(PROCESS_NAME)


def url(port: int = PORT) -> str:
    """Where a worker on this machine reaches the Redis listening on ``port``."""
    return f"redis://127.0.0.1:{port}/0"


def argv(port: int, directory: Path, binds: tuple[str, ...]) -> list[str]:
    """The command line of a ``redis-server`` on ``port``, working in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    return [
        "redis-server",
        "--bind",
        *binds,
        "--port",
        str(port),
        "--dir",
        str(directory),
        # Nothing to keep across a restart (see the module's docstring).
        "--save",
        "",
        "--appendonly",
        "no",
        # Bound to the addresses above alone; protected mode would also refuse the bridge.
        "--protected-mode",
        "no",
        # Redis otherwise rewrites its command line, and the stack knows its processes by theirs.
        "--set-proc-title",
        "no",
    ]


def wait_answering(port: int, *, alive: Callable[[], bool]) -> None:
    """Waits until Redis on ``port`` answers a PING, while ``alive`` says it still runs."""

    def answers() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    processes.wait_answering(
        answers,
        alive=alive,
        seconds=START_SECONDS,
        failure=f"Redis did not answer on 127.0.0.1:{port}; read its log, "
        f"{processes.log_file(PROCESS_NAME)}.",
    )


@contextmanager
def private(directory: Path) -> Iterator[str]:
    """A Redis of one caller's own on a free loopback port, until the block ends; its URL.

    The tests and the benchmark keep their pools here rather than in the stack's Redis, so two
    runs sharing one stack never see each other's pools.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (directory / "redis.log").open("wb") as log:
        process = subprocess.Popen(
            argv(port, directory, ("127.0.0.1",)), stdout=log, stderr=subprocess.STDOUT
        )
        try:
            wait_answering(port, alive=lambda: process.poll() is None)
            yield url(port)
        finally:
            process.terminate()
            process.wait(timeout=10)
