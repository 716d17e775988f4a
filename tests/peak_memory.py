"""A process's peak resident memory across one operation, and a child process to measure it in.

The kernel's high-water mark (``VmHWM``) is reset just before the operation through
``/proc/self/clear_refs``, so the delta is what the operation itself added on top of an already
warm process, not the import spike (Airflow's, say) that came before it, and not a peak
between two samples either. A child of its own keeps the operation clear of whatever its
parent held before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
MIB = 1024 * 1024
# Starts the child's line of results on stdout, to tell it apart from logging that shares it.
_MARKER = "measured: "


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field} line; measuring memory needs Linux.")


def peak_rss_delta(operation: Callable[[], T]) -> tuple[T, int]:
    """Run ``operation`` and return its result and the peak RSS it added, in bytes."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_bytes("VmRSS")
    result = operation()
    return result, _status_bytes("VmHWM") - before


def report(**measured: object) -> None:
    """In the child: print what it measured, as the one line ``run_child`` returns."""
    print(_MARKER + json.dumps(measured), flush=True)


def run_child(
    script: str, *args: str, timeout: float, env: Mapping[str, str] | None = None
) -> dict:
    """Run ``script`` in a fresh Python process and return what it ``report``-ed."""
    child = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    (line,) = [line for line in child.stdout.splitlines() if line.startswith(_MARKER)]
    return json.loads(line.removeprefix(_MARKER))
