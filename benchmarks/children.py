"""Runs ``benchmarks.worker`` measurements in child processes, bounded in time and address space."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

# Imported here, once, before the threads that run children: several children that give up at
# the same moment destroy their leftovers at once, and the SDK's manager module imported on
# two threads at the same time was seen to fail with an ImportError on one of them.
import opensandbox.sync.manager  # noqa: F401

from dev.stack.state import read_state
from tests.reliability.cleanup import destroy_directly

# A runaway subject gets a MemoryError instead of pushing the machine into swap; far above
# anything a bounded backend needs, far below what the machine has.
ADDRESS_SPACE_LIMIT = 8 * 1024 * 1024 * 1024
# After SIGTERM the worker unwinds and destroys its sandbox; this is how long that may take.
TERM_GRACE_SECONDS = 30.0


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


class Child:
    """One worker process measuring one case for one subject."""

    def __init__(self, request: dict, seconds: float, log_dir: Path) -> None:
        self.request = request
        self.seconds = seconds
        label = "-".join(str(value) for value in request.values())
        self.log_path = log_dir / f"{label}.log"
        log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.worker", json.dumps(request)],
                stdout=subprocess.PIPE,
                stderr=log,
                preexec_fn=_limit_address_space,
            )
        self.started = time.monotonic()

    def wait(self) -> dict:
        """The worker's result, or what went wrong, with any sandbox it left behind destroyed."""
        lines: list[dict] = []
        try:
            stdout, _ = self.process.communicate(
                timeout=max(0.0, self.started + self.seconds - time.monotonic())
            )
            outcome = None
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGTERM)
            try:
                stdout, _ = self.process.communicate(timeout=TERM_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                stdout, _ = self.process.communicate()
            outcome = {"error": f"gave up after {self.seconds:g} s"}
        with self.log_path.open("a") as log:
            for line in stdout.decode(errors="replace").splitlines():
                try:
                    parsed = json.loads(line)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict):
                    lines.append(parsed)
                else:
                    # Airflow's logging writes to stdout; it belongs with the rest of the log.
                    log.write(line + "\n")
        results = [line["result"] for line in lines if "result" in line]
        if results and outcome is None:
            return results[0]
        sandboxes = [line["sandbox"] for line in lines if "sandbox" in line]
        if outcome is None:
            status = self.process.returncode
            outcome = {"error": f"the worker exited with status {status}; see {self.log_path}"}
        destroy_directly(read_state().servers["plain"], sandboxes)
        outcome["destroyed_after_worker"] = sandboxes
        return outcome


def run(request: dict, seconds: float, log_dir: Path) -> dict:
    return Child(request, seconds, log_dir).wait()
