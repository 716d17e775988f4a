"""
A durable agent's sandbox: parked across its task's retries, and adopted by the next try
(docs/backend.rst, "A durable agent's sandbox"; how a try ends is :mod:`._try_end`'s).

Which step is running is read from common-ai's journal (its ``_EXECUTING_STEP``): nothing else
says that a call is a durable step, and of which run and toolset. A unit test holds common-ai
to it, so an upgrade that moves it fails the suite instead of turning parking off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.providers.common.ai.durable.base import build_step_key
from airflow.providers.common.ai.sandbox.base import (
    SandboxSpec,
    SandboxTerminalError,
    encode_network_policy,
)

from opensandbox_provider._identity import TaskInstanceIdentity, current_task_instance, label_value
from opensandbox_provider._kept import PARKED_KEY
from opensandbox_provider.sandbox._lease import RENEWALS_PER_LEASE

PARK_MARGIN = 900.0
"""
Seconds a parked sandbox waits past its task's retry delay. A try whose worker died is failed
only once Airflow's task-instance heartbeat timeout (300 s by default) has passed, and a retry
then waits its turn in the scheduler's loop and the executor's queue: a quarter of an hour
covers both on a busy deployment.
"""
# Airflow caps every retry delay at ``[core] max_task_retry_delay``, a day unless set.
_MAX_RETRY_DELAY = 24 * 60 * 60.0


@dataclass(frozen=True)
class DurableSlot:
    """Where a sandbox serves in a durable agent's task: the try asking, its journal place."""

    attempt: TaskInstanceIdentity
    """The try asking, its try number included."""
    calls: str
    """The journal's name for this toolset's calls in this run, without the tool's name."""
    label: str
    """The slot as a metadata label: the run, the toolset, the network policy."""
    run: Any
    """common-ai's ``DurableRun`` of the step asking."""
    position: int
    """The position of the step asking in that run."""
    park_lease: float
    """Seconds a parked sandbox waits for the next try: the retry delay and the margin."""

    def hold_lease(self, sandbox_timeout: float) -> float:
        """
        The lease to renew the sandbox by while its try runs: whatever the last renewal before
        a SIGKILL, what is left of it still covers the retry delay and the margin.
        """
        return max(sandbox_timeout, self.park_lease * RENEWALS_PER_LEASE / (RENEWALS_PER_LEASE - 1))

    def metadata(self) -> dict[str, str]:
        """The mark of a sandbox parked for this slot."""
        return {PARKED_KEY: self.label}

    def replays_calls(self) -> bool:
        """
        Whether the journal holds a call of this slot from before the step asking: one an
        earlier try made, since the step asking is this try's first live call of the toolset.
        """
        storage = self.run.journal.storage
        for position in reversed(range(self.position)):
            entry = storage.load_step(build_step_key(self.run.key, position))
            if entry is not None and _calls(str(entry.get("name", ""))) == self.calls:
                return True
        return False

    def gone(self, margin: float) -> SandboxTerminalError:
        """The error of a try whose journal replays calls made in a sandbox that is gone."""
        a = self.attempt
        mapped = "" if a.map_index < 0 else f"?map_index={a.map_index}"
        return SandboxTerminalError(
            f"Try {a.try_number} of task {a.task_id!r} (Dag {a.dag_id!r}, run {a.run_id!r}) "
            f"replays tool calls an earlier try made in its sandbox ({self.calls}), but no "
            "sandbox is parked for them any more: it ran out of its park lease (the retry came "
            f"later than the retry delay plus park_margin={margin:g}s after the failure) or "
            "someone killed it. Going on in a fresh sandbox would contradict the replayed "
            "steps, so this try fails. To run the agent again from the start, delete the task "
            "instance's durable journal and clear the task: on Airflow 3.3 and later the journal "
            f"is its task state store (DELETE /api/v2/dags/{a.dag_id}/dagRuns/{a.run_id}/"
            f"taskInstances/{a.task_id}/state-store{mapped}), before that its file under "
            "[common.ai] durable_cache_path. To keep later tries' sandboxes parked longer, "
            "raise the backend's park_margin."
        )


def durable_slot(spec: SandboxSpec | None, *, margin: float) -> DurableSlot | None:
    """
    The slot a sandbox provisioned now serves, or ``None`` unless this is a tool call run as a
    step of common-ai's durable journal in an Airflow task. A try with no retry to come has a
    slot too: it may adopt what an earlier try parked, and its end destroys what it holds.
    """
    # Here, not at the top: the journal module brings Airflow's task logging with it, which a
    # backend that never runs in a durable task should not pay for at import.
    from airflow.providers.common.ai.durable import journal

    executing = getattr(journal, "_EXECUTING_STEP", None)
    step = None if executing is None else executing.get()
    ti = current_task_instance()
    if step is None or ti is None:
        return None
    calls = _calls(step.name)
    policy = "unstated" if spec is None else encode_network_policy(spec)
    return DurableSlot(
        attempt=TaskInstanceIdentity.of(ti),
        calls=calls,
        label=label_value(f"{step.durable_run.key}/{calls}/{policy}"),
        run=step.durable_run,
        position=step.position,
        park_lease=retry_delay_bound(ti.task, ti.try_number) + margin,
    )


def retry_delay_bound(task: Any, try_number: int) -> float:
    """
    The longest Airflow waits, by ``task``'s retry settings, between try ``try_number``
    failing and the next: its ``retry_delay``, or with exponential backoff twice the backed-off
    delay (Airflow picks one between the two), at most ``max_retry_delay``.
    A ``RetryPolicy`` that sets its own delay is not seen here: the margin has to cover it.
    """
    from airflow.providers.common.compat.sdk import conf

    delay = _seconds(task.retry_delay)
    backoff = task.retry_exponential_backoff
    # Airflow 2 takes a flag, which doubles; Airflow 3 a multiplier, where 0 and 1 mean none.
    multiplier = 2.0 if backoff is True else float(backoff or 0)
    if multiplier > 0 and multiplier != 1:
        try:
            delay = 2 * max(1.0, delay * multiplier ** (try_number - 1))
        except OverflowError:
            delay = math.inf
        if task.max_retry_delay:
            delay = min(delay, _seconds(task.max_retry_delay))
    cap = conf.getfloat("core", "max_task_retry_delay", fallback=_MAX_RETRY_DELAY)
    return min(delay, cap)


def _calls(step_name: str) -> str:
    # A tool call's step is named ``<agent>__airflow_toolset__<toolset id>.call_tool:<tool>``;
    # what comes before the tool's name is the same for every call of the toolset in a run.
    return step_name.rpartition(":")[0] or step_name


def _seconds(value: timedelta | float) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
