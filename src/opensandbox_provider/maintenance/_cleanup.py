"""The leaked sandboxes found and killed: a task instance's that no try of it will use again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from opensandbox_provider import _metrics
from opensandbox_provider._kept import still_kept
from opensandbox_provider.maintenance._states import may_come_back
from opensandbox_provider.sandbox._lifecycle import TERMINATED, Lifecycle

if TYPE_CHECKING:
    from opensandbox_provider._identity import TaskInstanceIdentity
    from opensandbox_provider.hooks._sandboxes import SandboxSummary
    from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

log = logging.getLogger(__name__)

StateReader = Callable[["TaskInstanceIdentity"], "str | None"]
"""The state Airflow has for a task instance, ``None`` when it has none or no such instance."""


def kill_leaked_sandboxes(
    hook: OpenSandboxHook, state_of: StateReader, *, dag_ids: Collection[str] = ()
) -> list[str]:
    """
    Kill every sandbox this provider made for a task instance in a state that never comes
    back to it; return their ids. ``dag_ids`` keeps to those Dags' sandboxes. What it leaves
    alone is docs/operator.rst's, "Cleaning up leaked sandboxes".
    """
    killed = []
    lifecycle = Lifecycle(lambda: hook.connection_config)
    # A task instance is asked about once a run, however many sandboxes its tries left.
    states: dict[tuple[str, str, str, int], str | None] = {}
    for sandbox in _listed(hook, dag_ids):
        identity = sandbox.identity
        if sandbox.state == TERMINATED or identity is None or sandbox.provisioned:
            continue
        if still_kept(sandbox.kept_until):
            continue
        key = (identity.dag_id, identity.task_id, identity.run_id, identity.map_index)
        if key not in states:
            states[key] = state_of(identity)
        if may_come_back(states[key]):
            continue
        if lifecycle.kill(sandbox.id):
            log.info(
                "Killed sandbox %s: task %s of run %s of Dag %s is %s, so no try of it uses "
                "the sandbox again.",
                sandbox.id,
                identity.task_id,
                identity.run_id,
                identity.dag_id,
                states[key] or "without a state (cleared, or its run deleted)",
            )
            killed.append(sandbox.id)
    log.info("Killed %d leaked sandbox(es).", len(killed))
    _metrics.count(_metrics.KILLED_BY_CLEANUP, len(killed))
    return killed


def _listed(hook: OpenSandboxHook, dag_ids: Collection[str]) -> list[SandboxSummary]:
    if not dag_ids:
        return hook.list_sandboxes()
    return [sandbox for dag_id in sorted(dag_ids) for sandbox in hook.list_sandboxes(dag_id=dag_id)]
