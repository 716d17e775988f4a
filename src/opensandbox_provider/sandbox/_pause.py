"""
Pausing a sandbox no task holds, and resuming it when the next one reaches for it.

A provisioned sandbox waits between its tasks for up to one lease. Paused, it holds its
memory and its files but no CPU: the server freezes the container and its egress sidecar
together, and thaws them together, so the network policy stays what it was. Pausing does
not stop the server's clock: a paused sandbox still ends one lease after its last renewal,
so a Dag run that never comes back leaves nothing behind for longer than a running one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from opensandbox_provider._errors import api_exceptions, status_of

if TYPE_CHECKING:
    from opensandbox.models.sandboxes import SandboxInfo

    from opensandbox_provider.sandbox._lifecycle import Lifecycle

# The state the server reports for a frozen sandbox.
PAUSED_STATE = "Paused"
# The server answers 409 to pausing what is not running and to resuming what is not paused.
_WRONG_STATE = 409


def pause(lifecycle: Lifecycle, sandbox: str) -> bool:
    """Pause ``sandbox``; ``False`` if it was not running (already paused, or ended)."""
    with lifecycle.call(f"pause sandbox {sandbox}") as api:
        try:
            api.pause_sandbox(sandbox)
        except api_exceptions() as e:
            if status_of(e) == _WRONG_STATE:
                return False
            raise
    return True


def is_paused(info: SandboxInfo) -> bool:
    return bool(info.status.state == PAUSED_STATE)


def resume(lifecycle: Lifecycle, sandbox: str) -> float:
    """Resume a paused ``sandbox``; how long the server took."""
    started = time.monotonic()
    with lifecycle.call(f"resume sandbox {sandbox}") as api:
        try:
            api.resume_sandbox(sandbox)
        except api_exceptions() as e:
            # Another task resumed it between our read of its state and this call: it runs,
            # which is all this call was for.
            if status_of(e) != _WRONG_STATE:
                raise
    return time.monotonic() - started
