"""The worker's peak resident memory across one operation, in a process of its own.

The kernel's high-water mark (``VmHWM``) is reset just before the operation through
``/proc/self/clear_refs``, so the delta is what the operation itself added on top of an already
warm process, not the import spike that came before it.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
MIB = 1024 * 1024


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field} line; the bench needs Linux.")


def peak_rss_delta(operation: Callable[[], T]) -> tuple[T, float]:
    """Run ``operation`` and return its result and the peak RSS it added, in MiB."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    result = operation()
    return result, (_status_kib("VmHWM") - before) / 1024
