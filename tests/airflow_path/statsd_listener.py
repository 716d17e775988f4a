"""A StatsD listener of our own on loopback: what an Airflow told to send its metrics here sent."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType

# Airflow's default [metrics] statsd_prefix, before every name the provider sends.
PREFIX = "airflow."
# The longest datagram StatsD clients send; a bigger one would be cut, not split.
DATAGRAM_BYTES = 65535


@dataclass(frozen=True)
class Metric:
    """One metric of a StatsD datagram: ``name:value|kind``."""

    name: str
    value: float
    kind: str


def parsed(datagram: bytes) -> list[Metric]:
    """The metrics of one datagram, one a line (a client may batch them); sample rates and
    tags after the kind are left out, and so is a line that is no metric."""
    metrics = []
    for line in datagram.decode(errors="replace").splitlines():
        name, _, rest = line.partition(":")
        value, _, kind = rest.partition("|")
        try:
            metrics.append(Metric(name, float(value), kind.split("|")[0]))
        except ValueError:
            continue
    return metrics


class StatsdListener:
    """
    A UDP socket on loopback, read by a thread of its own from the start: Airflow's scheduler
    sends metrics all the time, and a socket read only when asked would fill its buffer and drop
    the ones a test waits for.
    """

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self._received: list[Metric] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._reader = threading.Thread(target=self._read, name="statsd-listener", daemon=True)
        self._reader.start()

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    def settings(self) -> dict[str, str]:
        """The environment that points an Airflow's metrics at this listener."""
        return {
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(self.port),
        }

    def received(self, name: str) -> list[Metric]:
        """Every metric named ``name`` (without Airflow's prefix) received so far."""
        with self._lock:
            return [metric for metric in self._received if metric.name == PREFIX + name]

    def wait_for(self, name: str, *, timeout: float) -> list[Metric]:
        """The metrics named ``name``, once at least one came; an assertion error if none did."""
        deadline = time.monotonic() + timeout
        while not (found := self.received(name)):
            assert time.monotonic() < deadline, f"No {PREFIX}{name} reached the listener."
            time.sleep(0.2)
        return found

    def _read(self) -> None:
        while not self._stopped.is_set():
            try:
                datagram = self._socket.recv(DATAGRAM_BYTES)
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            metrics = parsed(datagram)
            with self._lock:
                self._received.extend(metrics)

    def close(self) -> None:
        self._stopped.set()
        self._reader.join()
        self._socket.close()

    def __enter__(self) -> StatsdListener:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
