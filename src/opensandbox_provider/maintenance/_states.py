"""Which task instance states may still come back to a sandbox, and which never will."""

from __future__ import annotations

ENDED = frozenset(
    {"success", "failed", "skipped", "upstream_failed", "removed", "up_for_retry", "shutdown"}
)
"""
The states after which no try of a task instance uses the sandboxes it made. Failed with
retries left (``up_for_retry``) is one: the next try's first act is to kill what earlier
tries left, so it never uses their sandboxes, and a try Airflow already counted as failed
(a worker that stopped heartbeating) has nothing to finish that Airflow would keep.
``shutdown`` is Airflow 2's state of a try it was stopping, which Airflow 3 dropped; that try
is over.
"""

ALIVE = frozenset(
    {
        "scheduled",
        "queued",
        "running",
        "restarting",
        "up_for_reschedule",
        "deferred",
        "awaiting_input",
    }
)
"""
The states of Airflow 2.11 to 3.3 in which a task instance may still use its sandbox. A
trigger's event sets a deferred task to ``scheduled`` and a free slot to ``queued``, and it
resumes in the same sandbox; a task cleared while it runs is ``restarting`` until its try
is stopped, which kills that try's sandbox itself; ``awaiting_input`` is a task parked for a
person's answer, which resumes as a deferred task does.
"""


def may_come_back(state: str | None) -> bool:
    """
    Whether a task instance in ``state`` may still use the sandboxes it made. ``None`` (no
    state: cleared, or no such task instance) never will: a cleared task's next try kills
    them first. A state this module does not know counts as alive, so an Airflow that adds
    one never gets a live task's sandbox killed.
    """
    return state is not None and state not in ENDED
