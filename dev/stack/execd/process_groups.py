"""How a command's process group is ended: at its deadline, after its shell exits, on interrupt."""

import os
import signal
import subprocess
import time

INTERRUPT_GRACE = 3.0  # SIGTERM, up to 3 s, then SIGKILL (docs/execd-wire.rst, wire-interrupt).
# The group is probed every 50 ms (docs/execd-wire.rst, wire-interrupt).
GROUP_PROBE_INTERVAL = 0.05


def kill_group(pid: int) -> None:
    """On a deadline, SIGKILL to the leader and to its whole process group, with no grace
    (docs/execd-wire.rst, wire-timeout)."""
    for kill in (lambda: os.kill(pid, signal.SIGKILL), lambda: os.killpg(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


def wait_with_deadline(process: subprocess.Popen, timeout_ms: int) -> int:
    """A timeout > 0 kills the group at the deadline; 0 means no timeout
    (docs/execd-wire.rst, wire-timeout)."""
    try:
        return process.wait(timeout=timeout_ms / 1000 if timeout_ms > 0 else None)
    except subprocess.TimeoutExpired:
        kill_group(process.pid)
        return process.wait()


def kill_leftovers(pgid: int) -> None:
    """execd cancels the command's context once the shell has exited, and its watcher then
    SIGKILLs the group: whatever the command left running in its group dies with it. Only the
    group: the leader is reaped, so its pid alone may already belong to another process."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def wait_for_group_to_exit(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not process_group_alive(pgid):
            return True
        time.sleep(GROUP_PROBE_INTERVAL)
    return False


def terminate_group(pgid: int) -> None:
    """SIGTERM to the group, up to 3 s for it to go, then SIGKILL; returns once it is gone.
    Raises the OSError of the SIGKILL only when neither signal could be delivered
    (docs/execd-wire.rst, wire-interrupt)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except OSError:
        term_delivered = False
    else:
        term_delivered = True
        if wait_for_group_to_exit(pgid, INTERRUPT_GRACE):
            return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    except OSError:
        if term_delivered:
            return
        raise
    wait_for_group_to_exit(pgid, 3 * GROUP_PROBE_INTERVAL)
