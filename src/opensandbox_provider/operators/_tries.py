"""The sandboxes of a task instance's other tries, found by identity and killed."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from opensandbox_provider import _metrics
from opensandbox_provider._kept import still_kept
from opensandbox_provider.sandbox._lifecycle import TERMINATED, Lifecycle

if TYPE_CHECKING:
    from opensandbox_provider._identity import TaskInstanceIdentity
    from opensandbox_provider.hooks._sandboxes import SandboxSummary
    from opensandbox_provider.hooks.opensandbox import OpenSandboxHook


def kill_other_tries(
    hook: OpenSandboxHook, identity: TaskInstanceIdentity, *, keep: str
) -> list[SandboxSummary]:
    """
    Kill every sandbox an earlier try of this task instance left, all but ``keep``, this try's
    own, and but those still kept (docs/operator.rst, "Retries and finding a task's sandbox");
    return those killed. Killed rather than reattached: a foreground try's command streamed its
    output to a worker that is gone, so nothing could pick up where it stopped, and two tries'
    commands must never run at once.
    """
    found = hook.list_sandboxes(
        dag_id=identity.dag_id,
        task_id=identity.task_id,
        run_id=identity.run_id,
        map_index=identity.map_index,
    )
    left = [
        sandbox
        for sandbox in found
        if sandbox.id != keep and sandbox.state != TERMINATED and not still_kept(sandbox.kept_until)
    ]
    lifecycle = Lifecycle(lambda: hook.connection_config)
    killed = [sandbox for sandbox in left if lifecycle.kill(sandbox.id)]
    _metrics.count(_metrics.KILLED_BY_RETRY, len(killed))
    return killed


def kill_this_try(hook: OpenSandboxHook, identity: TaskInstanceIdentity) -> list[str]:
    """Kill the sandboxes this try created, found by its identity; return the ids killed."""
    lifecycle = Lifecycle(lambda: hook.connection_config)
    # The identity's fields, try_number among them, are the listing's filters of those names.
    found = hook.list_sandboxes(**asdict(identity))
    return [sandbox.id for sandbox in found if lifecycle.kill(sandbox.id)]
