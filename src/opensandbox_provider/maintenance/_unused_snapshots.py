"""The snapshots this deployment prepared that no task has used for a set time, removed."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.hooks._sandboxes import PAGE_SIZE
from opensandbox_provider.sandbox import _arguments, _snapshot_use, _snapshots
from opensandbox_provider.sandbox._lifecycle import TERMINATED

if TYPE_CHECKING:
    from opensandbox_provider.sandbox._lifecycle import Lifecycle

log = logging.getLogger(__name__)

DEFAULT_UNUSED_SNAPSHOT_AGE = timedelta(days=7)
"""A week: a Dag run daily or weekly keeps its snapshots, one that stopped loses them."""
# A use is recorded at most once per interval, so a record may be that far behind the last
# use; twice the interval leaves a snapshot at least one interval of real disuse.
MIN_UNUSED_SNAPSHOT_AGE = 2 * _snapshot_use.RECORD_INTERVAL


def checked_unused_age(value: timedelta | float | None) -> timedelta | None:
    """``unused_snapshot_age`` as a ``timedelta``, refused when the Dag is parsed if wrong."""
    age = _arguments.age(value, "unused_snapshot_age", none_means="removes no snapshot")
    if age is not None and age < MIN_UNUSED_SNAPSHOT_AGE:
        hours = MIN_UNUSED_SNAPSHOT_AGE / timedelta(hours=1)
        minutes = _snapshot_use.RECORD_INTERVAL / timedelta(minutes=1)
        raise ValueError(
            f"unused_snapshot_age is {value!r}; give at least {hours:g} hours: a use is "
            f"recorded at most once every {minutes:g} minutes, so a shorter age could remove a "
            "snapshot a task used a moment ago."
        )
    return age


def remove_unused_snapshots(
    lifecycle: Lifecycle, *, deployment: str, unused_for: timedelta, now: datetime | None = None
) -> list[str]:
    """
    Remove every snapshot ``deployment`` prepared that no task has used for ``unused_for``;
    return their ids. Which it judges, and which it leaves, is docs/prepared-environments.rst's,
    "When a snapshot is removed".
    """
    at = datetime.now(UTC) if now is None else now
    running_from = _started_from(lifecycle)
    removed = []
    for info in _snapshots.listed_snapshots(lifecycle):
        if not _snapshots.is_prepared_by(info.name, deployment):
            continue
        if info.status.state == _snapshots.CREATING_STATE or info.id in running_from:
            continue
        used = _snapshot_use.last_used(info.id) or _snapshots.made_at(info)
        if at - used < unused_for:
            continue
        try:
            _snapshots.delete(lifecycle, info.id)
        except SandboxError as e:
            # A sandbox started from it since the listing, most likely.
            log.warning(
                "Could not remove snapshot %s (%s): %s. The next cleanup tries again.",
                info.id,
                info.name,
                e,
            )
            continue
        log.info(
            "Removed snapshot %s (%s): no task has used it since %s, longer ago than "
            "unused_snapshot_age (%s).",
            info.id,
            info.name,
            used.isoformat(),
            unused_for,
        )
        removed.append(info.id)
    log.info("Removed %d unused snapshot(s).", len(removed))
    return removed


def _started_from(lifecycle: Lifecycle) -> set[str]:
    """The snapshots that sandboxes on the server, not yet ended, were started from."""
    from opensandbox.models.sandboxes import SandboxFilter

    found: set[str] = set()
    page = 1
    while True:
        with lifecycle.call("list the sandboxes on the server") as api:
            answer = api.list_sandbox_infos(SandboxFilter(page=page, page_size=PAGE_SIZE))
        # Any sandbox but a terminated one keeps its image, which the server then refuses to
        # remove, leaving the snapshot half deleted.
        found |= {
            info.snapshot_id
            for info in answer.sandbox_infos
            if info.snapshot_id and info.status.state != TERMINATED
        }
        if not answer.pagination.has_next_page:
            return found
        page += 1
