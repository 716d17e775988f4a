"""Every warm pool a test makes, so that the run can drain them all and say which left any.

A test's own fixture drains its pools when it ends. What is still registered is drained once
more before the pools' Redis stops, and the run-wide leak check (tests/leak_check.py) fails the
run if that found an idle sandbox.
"""

from __future__ import annotations

from opensandbox_provider.pool import WarmPool, drain

made: list[WarmPool] = []
# Pool name -> idle sandboxes a drain found after the tests that made the pool had ended.
left_idle: dict[str, int] = {}


def register(pool: WarmPool) -> WarmPool:
    made.append(pool)
    return pool


def forget(pool: WarmPool) -> None:
    """Stop tracking ``pool``: the test that made it drained it."""
    made.remove(pool)


def drain_all() -> dict[str, int]:
    """Destroy the idle sandboxes of every pool still registered; return those that had any."""
    while made:
        pool = made.pop()
        count = drain(pool)
        if count:
            left_idle[pool.name] = left_idle.get(pool.name, 0) + count
    return left_idle
