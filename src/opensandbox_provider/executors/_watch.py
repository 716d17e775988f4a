"""
Tries whose task instance Airflow has ended (marked in the UI, or cleared) while their sandbox
still runs. The Task SDK inside hears of it only at its next heartbeat and takes its time
ending, so the executor destroys such a sandbox itself, within the ten seconds a user watching
the UI expects.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from uuid import UUID

    from airflow.models.taskinstancekey import TaskInstanceKey

# The states in which a try's sandbox has work to do.
RUNNING_STATES = frozenset({"queued", "running"})
# How long a try's task instance must have been out of those states before its sandbox is
# destroyed: a try that ends normally reports its state a moment before its process exits and
# its log is copied out, which this leaves time for.
GRACE_SECONDS = 5.0
# A try that succeeded may run on past its report: the Task SDK gives its process Airflow's
# ``[core] task_success_overtime`` (listeners and the like) before it ends it, and a loaded
# machine took over five seconds to end one that had nothing left to do. Its sandbox is left
# that long, and this much more for the Task SDK's own end to come first.
SUCCESS_OVERTIME_MARGIN = 5.0
# How often the states are read: one query for every running try at once.
CHECK_INTERVAL = 1.0


class EndedElsewhere:
    """
    Remembers since when each try's task instance has been ended by someone else. Read on a
    thread of its own, never the scheduler's: Airflow's sessions are one per thread, and closing
    one here would detach the task instances the scheduler's loop holds.
    """

    def __init__(self) -> None:
        self._since: dict[TaskInstanceKey, float] = {}

    def to_end(self, tries: Mapping[TaskInstanceKey, UUID]) -> dict[TaskInstanceKey, str]:
        """The tries of ``tries`` (key to task instance id) to end now, each with its state."""
        states = current_states(list(tries.values()))
        now = time.monotonic()
        ending = {}
        for key, ti_id in tries.items():
            state, try_number = states.get(str(ti_id), ("removed", None))
            if state in RUNNING_STATES and try_number == key.try_number:
                self._since.pop(key, None)
                continue
            since = self._since.setdefault(key, now)
            ended = state if try_number == key.try_number else "cleared"
            if now - since >= grace_for(ended):
                ending[key] = ended
        for key in set(self._since) - set(tries):
            del self._since[key]
        return ending


def grace_for(state: str) -> float:
    """How long after its task instance became ``state`` a running try's sandbox is left."""
    if state != "success":
        return GRACE_SECONDS
    from airflow.configuration import conf

    overtime = conf.getfloat("core", "task_success_overtime", fallback=20.0)
    return max(GRACE_SECONDS, overtime + SUCCESS_OVERTIME_MARGIN)


def current_states(ti_ids: list[UUID]) -> dict[str, tuple[str, int | None]]:
    """Each task instance's state and try number, by its id, from the metadata database."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    if not ti_ids:
        return {}
    query = select(TaskInstance.id, TaskInstance.state, TaskInstance.try_number).where(
        TaskInstance.id.in_(ti_ids)
    )
    with create_session() as session:
        rows = session.execute(query).all()
    return {
        str(ti_id): (str(getattr(state, "value", state) or "none"), try_number)
        for ti_id, state, try_number in rows
    }
