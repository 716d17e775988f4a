"""
The metrics this provider sends through Airflow's ``Stats``, named in one place (docs/metrics.rst
lists them with their meanings).

Airflow prefixes every name with its ``[metrics] statsd_prefix`` (``airflow`` by default), and
sends nothing unless a metrics backend is configured. Tags reach only backends that carry them
(Datadog, OpenTelemetry, StatsD with InfluxDB tags); a route is in the name too, so that plain
StatsD tells them apart.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Literal

log = logging.getLogger(__name__)

Route = Literal["cold", "warm_pool", "server_pool"]
"""How a sandbox came to a task: created by the server, taken from a warm pool, or bound by
the server from a Kubernetes pool."""

CREATED = "opensandbox.sandbox.create.{route}"
"""Timer: from asking for a sandbox to its being ready for a command (execd answering, the
egress policy proven, the working directory made), by route."""
WARM_POOL_HIT = "opensandbox.warm_pool.hit"
"""Counter: a draw that took a ready sandbox from a warm pool."""
WARM_POOL_MISS = "opensandbox.warm_pool.miss"
"""Counter: a draw that got none (empty, unreachable, or made with other arguments), whether
the task then created one or failed as the pool said."""
KILLED_BY_RETRY = "opensandbox.sandbox.killed.retry"
"""Counter: sandboxes an earlier try of a task instance left, killed by the operator before
its next try's command ran."""
KILLED_BY_CLEANUP = "opensandbox.sandbox.killed.cleanup"
"""Counter: leaked sandboxes the maintenance cleanup killed."""
STREAM_ABANDONED = "opensandbox.command.abandoned"
"""Counter: commands whose output stream was given up on, their sandbox destroyed to end them."""
POLICY_UNENFORCED = "opensandbox.egress.policy_unenforced"
"""Counter: sandboxes refused because their egress sidecar did not prove the network policy."""

NAMES = (
    *(CREATED.format(route=route) for route in ("cold", "warm_pool", "server_pool")),
    WARM_POOL_HIT,
    WARM_POOL_MISS,
    KILLED_BY_RETRY,
    KILLED_BY_CLEANUP,
    STREAM_ABANDONED,
    POLICY_UNENFORCED,
)


def sandbox_created(route: Route, seconds: float) -> None:
    """Time one sandbox's way to ready, under its route's name and tag."""
    _emit("timing", CREATED.format(route=route), timedelta(seconds=seconds), tags={"route": route})


def count(name: str, times: int = 1, *, tags: dict[str, str] | None = None) -> None:
    """Add ``times`` to the counter ``name``; nothing when it is 0."""
    if times:
        _emit("incr", name, times, tags=tags or {})


def _emit(kind: str, name: str, value: object, *, tags: dict[str, str]) -> None:
    # Imported here: the backend loads in processes that never emit, and its import time is
    # kept short (the packaging tests measure it).
    from airflow.providers.common.compat.sdk import AirflowTaskTimeout

    try:
        from airflow.providers.common.compat.sdk import Stats

        getattr(Stats, kind)(name, value, tags=tags)
    except AirflowTaskTimeout:
        raise
    except Exception:
        # A metric is never worth a task: a backend misconfigured (a bad allow list, an
        # unreachable host, a stat-name handler that raises) costs the metric alone.
        log.debug("Could not send metric %s.", name, exc_info=True)
