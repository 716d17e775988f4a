"""
How a task's try ended, told in the task's own process through Airflow's task listeners: a
toolset tells its backend only that a run is over, never whether the try failed, and a try
may still fail after its agent ended well. The listener is added once per process, when the
first thing waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from airflow.listeners import hookimpl

from opensandbox_provider._identity import TaskInstanceIdentity

# Airflow's state of a try that failed with a retry to come.
_UP_FOR_RETRY = "up_for_retry"

Ending = Callable[[bool], None]
"""Called with whether the task will be tried again."""


class _TryEnds:
    """The listener: runs what each ending try's process registered for it, once."""

    def __init__(self) -> None:
        self._waiting: dict[TaskInstanceIdentity, list[Ending]] = {}
        self._lock = threading.Lock()
        self._listening = False

    def when_over(self, attempt: TaskInstanceIdentity, ending: Ending) -> None:
        """Call ``ending`` when ``attempt`` (a try of a task instance) ends."""
        with self._lock:
            self._waiting.setdefault(attempt, []).append(ending)
            listening, self._listening = self._listening, True
        if not listening:
            _listener_manager().add_listener(self)

    def _over(self, task_instance: Any, *, retrying: bool) -> None:
        with self._lock:
            endings = self._waiting.pop(TaskInstanceIdentity.of(task_instance), [])
        for ending in endings:
            ending(retrying)

    @hookimpl
    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        self._over(task_instance, retrying=False)

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        self._over(task_instance, retrying=task_instance.state == _UP_FOR_RETRY)

    @hookimpl
    def on_task_instance_skipped(self, previous_state: Any, task_instance: Any) -> None:
        self._over(task_instance, retrying=False)


def _listener_manager() -> Any:
    try:
        # The manager Airflow 3's task runner calls its listeners through, by the name it calls
        # it: which module that name comes from has changed between Airflow 3 releases.
        from airflow.sdk.execution_time.task_runner import get_listener_manager
    except ImportError:  # Airflow 2 runs a task's listeners from the core's manager.
        from airflow.listeners.listener import get_listener_manager as core_manager

        return core_manager()
    return get_listener_manager()


TRY_ENDS = _TryEnds()
"""This process's listener for the ends of tries."""
