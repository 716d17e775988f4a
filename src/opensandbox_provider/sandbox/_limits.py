"""
The checks common-ai's backends put on their numeric arguments, and the whole-export deadline.

common-ai keeps these private, so they are restated here rather than imported: a private name
may change in any release. They must still answer as common-ai's own backends do, since the
toolset and its users see both; a unit test pins every value and message to common-ai's.
"""

from __future__ import annotations

import math
import time

from airflow.providers.common.ai.sandbox.base import SandboxError

# Any export may take this long, however small the file: the budget common-ai gives the
# shell helpers behind its default file operations.
MIN_EXPORT_ALLOWANCE = 120.0
# The slowest an export may run on average before it is ended, so a guest that trickles a
# byte at a time cannot hold the task open: 1 GiB, the toolset's default budget, gets about
# 17 minutes.
EXPORT_MIN_RATE = 1024 * 1024


def validate_positive_finite(value: float, name: str) -> None:
    """Refuse ``value`` for the argument ``name`` unless it is a number above zero and finite."""
    # ``True`` passes every arithmetic test as 1, but is always a caller's mistake here.
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}.")


def byte_budget(value: float, name: str) -> int:
    """``value``, checked as :func:`validate_positive_finite` checks it, in whole bytes."""
    validate_positive_finite(value, name)
    # Up, never down: half a byte read as 0 would be no bound at all, since a tail of the
    # last 0 bytes slices as the whole of what it holds.
    return math.ceil(value)


def export_allowance(max_bytes: int) -> float:
    """Seconds a whole export of a file of up to ``max_bytes`` may take."""
    return max(MIN_EXPORT_ALLOWANCE, max_bytes / EXPORT_MIN_RATE)


def check_export_deadline(path: str, deadline: float, max_bytes: int) -> None:
    """Refuse to go on exporting ``path`` once ``deadline`` has passed."""
    if time.monotonic() > deadline:
        raise SandboxError(
            f"Exporting {path!r} took longer than the {export_allowance(max_bytes):g}s allowed "
            f"for a file of up to {max_bytes} bytes; the sandbox is sending it too slowly."
        )
