"""A warm pool's keeper as ``make demo``, ``make bench`` and the Airflow tests run it: started
by this process, waited for until the pool is full, then stopped by its PID and the pool
drained, so that no idle sandbox outlives the run. A deployment runs the keeper as a service of
its own (docs/pools.rst).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# A keeper imports Airflow and the pool's module first, then starts its sandboxes: measured,
# one sandbox is ready 3-6 s after the keeper starts; the bound leaves room for a loaded
# two-core machine filling several.
FILLED_TIMEOUT = 180.0
# A keeper asked to stop destroys nothing and returns within a second; one that has not left
# by then is killed, and the drain still removes what it left.
STOP_TIMEOUT = 30.0
DRAIN_TIMEOUT = 120.0
_FULL = re.compile(r"(\d+) of (\d+) idle\.$")


def _pool_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "opensandbox_provider.pool", *arguments]


@dataclass
class Keeper:
    """A running keeper of the pool ``reference`` (``module:NAME``, imported from ``folder``);
    ``filled`` is what the pool's status said when it was first full."""

    reference: str
    folder: Path
    environment: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path
    filled: str = ""

    def status(self) -> str:
        """What ``python -m opensandbox_provider.pool status`` says of the pool."""
        result = subprocess.run(
            _pool_command("status", self.reference),
            cwd=self.folder,
            env=self.environment,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return result.stdout.strip() or result.stderr.strip()

    def wait_until_full(self) -> str:
        """Until every sandbox of the pool is idle; its status then."""
        deadline = time.monotonic() + FILLED_TIMEOUT
        while True:
            status = self.status()
            counts = _FULL.search(status)
            if counts and counts[1] == counts[2]:
                return status
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"The pool's keeper exited {self.process.returncode}; see {self.log}."
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"The pool was not filled in {FILLED_TIMEOUT:.0f}s: {status}")
            time.sleep(1.0)


@contextmanager
def kept_pool(
    reference: str, *, folder: Path, environment: dict[str, str], log: Path
) -> Iterator[Keeper]:
    """Keep the pool ``reference`` filled while the context runs, its keeper's output in
    ``log``; yield the keeper once the pool is full."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        process = subprocess.Popen(
            _pool_command("keep", reference),
            cwd=folder,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    keeper = Keeper(reference, folder, environment, process, log)
    try:
        keeper.filled = keeper.wait_until_full()
        yield keeper
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        drain = _pool_command("drain", reference)
        subprocess.run(drain, cwd=folder, env=environment, check=False, timeout=DRAIN_TIMEOUT)
