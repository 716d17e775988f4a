"""The demo as a test runs it: started so that it sees a Ctrl-C, and stopped, however the test
ends, with nothing it started left running."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from dev.airflow_stack import components

# The demo's own stop: each component gets up to components.STOP_GRACE_SECONDS, then the warm
# pool's keeper is stopped and the pool drained. Past this the demo is killed.
DEMO_STOP_GRACE_SECONDS = 90.0


def _sigint_at_its_default() -> None:
    # A job a script starts in the background inherits SIGINT ignored, and a Python started
    # so installs no KeyboardInterrupt handler: the demo would never see the test's Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    """Start the demo ``argv`` leading a session of its own, its output in one text pipe."""
    return subprocess.Popen(
        argv,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_sigint_at_its_default,
    )


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass  # the demo and everything in its group have ended


def stop(demo: subprocess.Popen[str], home: Path) -> list[str]:
    """End ``demo`` and every Airflow component it recorded in ``home``; returns the names of
    the components that were still running.

    The demo is asked first, with SIGTERM, as its stop also drains the warm pool it keeps;
    one that does not end in time is killed with everything in its session. Each component
    leads a session of its own, which no signal to the demo reaches: they are stopped by the
    PIDs the demo wrote for them.
    """
    if demo.poll() is None:
        _signal_group(demo.pid, signal.SIGTERM)
        try:
            demo.communicate(timeout=DEMO_STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            # Unreaped, the demo still holds its group's id, so the signal reaches only the
            # demo and what it started there (the pool's keeper), never a process that
            # reused the id.
            _signal_group(demo.pid, signal.SIGKILL)
            demo.wait()
    return components.stop(home)
