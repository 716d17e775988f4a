"""
When a task last used a prepared snapshot, which the maintenance cleanup judges it by: an
Airflow Variable per snapshot id, written at most once an hour (docs/prepared-environments.rst,
"When a snapshot is removed").
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from opensandbox_provider import _variables

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger(__name__)

KEY_PREFIX = "opensandbox_snapshot_used."
RECORD_INTERVAL = timedelta(hours=1)
_DESCRIPTION = (
    "Made by airflow-provider-opensandbox: when a task last used the prepared snapshot {name}. "
    "The OpenSandbox maintenance cleanup removes the snapshot once this is older than its "
    "unused_snapshot_age, and deletes this Variable with it."
)


def key(snapshot_id: str) -> str:
    """The Variable holding when ``snapshot_id`` was last used."""
    return KEY_PREFIX + snapshot_id


def record_use(snapshot_id: str, name: str, *, now: datetime | None = None) -> None:
    """
    Record that a task uses ``snapshot_id`` now, unless a use less than an hour ago was
    recorded. A failure to record is logged and the task goes on: its environment is ready,
    and the cost of a lost record is a snapshot the cleanup may remove early, which the next
    task that needs it prepares again.
    """
    at = datetime.now(UTC) if now is None else now

    def record() -> None:
        last = last_used(snapshot_id)
        if last is not None and at - last < RECORD_INTERVAL:
            return
        _variables.write(
            key(snapshot_id), at.isoformat(), description=_DESCRIPTION.format(name=name)
        )

    _tolerating(
        record,
        f"record that snapshot {snapshot_id} ({name}) was used",
        then="the maintenance cleanup counts its last use from an earlier record, or from "
        "when it was made",
        level=logging.WARNING,
    )


def last_used(snapshot_id: str) -> datetime | None:
    """When a use of ``snapshot_id`` was last recorded; ``None`` when none was."""
    value = _variables.read(key(snapshot_id))
    if value is None:
        return None
    try:
        recorded = datetime.fromisoformat(value.strip())
    except ValueError:
        # A record someone edited into something else says nothing of a use.
        return None
    return recorded if recorded.tzinfo is not None else recorded.replace(tzinfo=UTC)


def forget(snapshot_id: str) -> None:
    """Delete the record of ``snapshot_id``, once the snapshot itself is deleted."""
    _tolerating(
        lambda: _variables.delete(key(snapshot_id)),
        f"delete the Variable {key(snapshot_id)}",
        then="it stays, naming a snapshot that no longer exists, which nothing reads again",
        level=logging.INFO,
    )


def _tolerating(action: Callable[[], None], doing: str, *, then: str, level: int) -> None:
    # Imported here: the backend loads in processes that never prepare a snapshot, and its
    # import time is kept short (the packaging tests measure it).
    from airflow.providers.common.compat.sdk import AirflowTaskTimeout

    try:
        action()
    except AirflowTaskTimeout:
        raise
    except Exception as e:
        # Whatever the Variable store raises (a database's, the API server's, a secrets
        # backend's) costs the bookkeeping, never the task whose snapshot is ready.
        log.log(level, "Could not %s (%s: %s); %s.", doing, type(e).__name__, e, then)
