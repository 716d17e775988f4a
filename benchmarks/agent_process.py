"""One :mod:`benchmarks.agent_runs` worker process, watched from the parent.

Its JSON lines are read on a thread as they come, so the parent can wait for an event (every
run's command under way, say) while the process goes on, and still has every sandbox the
process reported when it has to kill a worker that hung.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dev.stack.state import ServerInfo

REPO = Path(__file__).resolve().parents[1]
# After SIGTERM a worker may take this long to go before it is killed.
TERM_GRACE_SECONDS = 15.0


class AgentProcess:
    def __init__(
        self,
        request: dict,
        env: dict[str, str],
        log: Path,
        *,
        prefix: list[str] | None = None,
    ) -> None:
        """``prefix`` runs the worker under another command (``ip netns exec NAME``)."""
        self.name = request["worker"]
        self.log = log
        self.events: list[dict] = []
        self.hung = False
        self._changed = threading.Condition()
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [*(prefix or []), sys.executable, "-m", "benchmarks.agent_runs", json.dumps(request)]
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                argv,
                cwd=REPO,
                env={**os.environ, **env},
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def on(
        cls,
        server: ServerInfo,
        name: str,
        *,
        through_server: bool,
        log_dir: Path,
        prefix: list[str] | None = None,
        sdk_telemetry: bool = True,
        **request: object,
    ) -> AgentProcess:
        """
        A worker named ``name`` with a connection of its own to ``server``; ``request`` is
        the rest of what :mod:`benchmarks.agent_runs` takes.

        The SDK reports each create's latency to the server (its telemetry), as it does on a
        worker unless ``OPENSANDBOX_DISABLE_METRICS=1`` is set there; ``sdk_telemetry=False``
        sets it, as every test does (tests/conftest.py), to measure without that report.
        Either way the worker is told explicitly, whatever the parent's environment holds.
        """
        conn_id = f"opensandbox_{name.replace('-', '_')}"
        env = {
            **server.airflow_connection_env(conn_id, use_server_proxy=through_server),
            "OPENSANDBOX_DISABLE_METRICS": "0" if sdk_telemetry else "1",
        }
        request = {"worker": name, "conn_id": conn_id, **request}
        return cls(request, env, log_dir / f"{name}.log", prefix=prefix)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                # Logging that went to stdout belongs with the rest of the worker's log.
                with self.log.open("a") as log:
                    log.write(line)
                continue
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def of(self, kind: str) -> list[dict]:
        """The events of one kind so far (``sandbox``, ``command``, ``run``, ``sample``)."""
        with self._changed:
            return [event for event in self.events if kind in event]

    def wait_until(self, ready: Callable[[AgentProcess], bool], seconds: float) -> bool:
        """Whether ``ready`` came true within ``seconds`` (False too once the process ended)."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while not ready(self):
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    return ready(self)
                self._changed.wait(min(left, 1.0))
            return True

    def finish(self, seconds: float) -> None:
        """Waits for the process to end; one still running after ``seconds`` is marked hung,
        terminated and, if it will not go, killed."""
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.hung = True
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=TERM_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=10)

    @property
    def sandboxes(self) -> list[str]:
        return [event["sandbox"] for event in self.of("sandbox")]

    def log_tail(self, characters: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-characters:]
