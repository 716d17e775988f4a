"""
The metrics this provider sends through Airflow's ``Stats``, named in one place; docs/metrics.rst
says what each means, how Airflow prefixes them, and why a route is in a name as well as a tag.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Literal, get_args

log = logging.getLogger(__name__)

# How a sandbox came to a task: created by the server, taken from a warm pool, or bound by
# the server from a Kubernetes pool.
Route = Literal["cold", "warm_pool", "server_pool"]

# tests/unit/test_metrics.py holds docs/metrics.rst to NAMES.
CREATED = "opensandbox.sandbox.create.{route}"  # a timer, by route
WARM_POOL_HIT = "opensandbox.warm_pool.hit"
WARM_POOL_MISS = "opensandbox.warm_pool.miss"
KILLED_BY_RETRY = "opensandbox.sandbox.killed.retry"
KILLED_BY_CLEANUP = "opensandbox.sandbox.killed.cleanup"
STREAM_ABANDONED = "opensandbox.command.abandoned"
POLICY_UNENFORCED = "opensandbox.egress.policy_unenforced"

NAMES = (
    *(CREATED.format(route=route) for route in get_args(Route)),
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
