"""
Pausing a sandbox no task holds, and resuming it when the next one reaches for it
(docs/prepared-environments.rst, "Pausing a provisioned sandbox between its tasks").

The Kubernetes runtime takes seconds each way (``Pausing``, ``Resuming``), so a sandbox on its
way is waited for, within the backend's ``ready_timeout``, before it is resumed or reached.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider._errors import api_exceptions, status_of

if TYPE_CHECKING:
    from opensandbox.models.sandboxes import SandboxInfo

    from opensandbox_provider.sandbox._lifecycle import Lifecycle

# The state the server reports for a frozen sandbox.
PAUSED_STATE = "Paused"
RUNNING_STATE = "Running"
# The states between running and paused, either way.
ON_THE_WAY = frozenset({"Pausing", "Resuming"})
_NOT_YET_RESUMED = ON_THE_WAY | {PAUSED_STATE}
# How often a sandbox on its way is asked again: a Kubernetes pause takes seconds.
_POLL_SECONDS = 0.5
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


def settled(
    lifecycle: Lifecycle, info: SandboxInfo, *, within: float, passing: frozenset[str] = ON_THE_WAY
) -> SandboxInfo:
    """``info``, or once the sandbox it describes is no longer in one of the ``passing``
    states (on its way between running and paused), its info read again; a sandbox still in
    one after ``within`` seconds is an error the task may retry."""
    sandbox = info.id
    deadline = time.monotonic() + within
    while info.status.state in passing:
        if time.monotonic() >= deadline:
            raise SandboxError(
                f"Sandbox {sandbox} was still {str(info.status.state).lower()} {within:g}s "
                "later. Retry the task, or raise ready_timeout."
            )
        time.sleep(_POLL_SECONDS)
        info = lifecycle.info(sandbox, doing=f"read the state of sandbox {sandbox}")
    return info


def resume(lifecycle: Lifecycle, sandbox: str, *, within: float) -> float:
    """Resume a paused ``sandbox`` and wait, up to ``within`` seconds, until the server says
    it runs; how long that took."""
    started = time.monotonic()
    with lifecycle.call(f"resume sandbox {sandbox}") as api:
        try:
            api.resume_sandbox(sandbox)
        except api_exceptions() as e:
            # Another task resumed it between our read of its state and this call: it runs,
            # which is all this call was for.
            if status_of(e) != _WRONG_STATE:
                raise
    info = lifecycle.info(sandbox, doing=f"read the state of sandbox {sandbox}")
    # The Kubernetes runtime may still report it paused just after the resume is accepted.
    state = settled(lifecycle, info, within=within, passing=_NOT_YET_RESUMED).status.state
    if state != RUNNING_STATE:
        raise SandboxError(f"Sandbox {sandbox} did not come back from its pause: it is {state}.")
    return time.monotonic() - started
