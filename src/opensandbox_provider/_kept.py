"""
A sandbox kept after its task ended, for someone to look into (``on_finish_action``, see
docs/operator.rst, "Keeping a sandbox after the task"): until when, in its metadata, which a
retry's kill and the maintenance cleanup read to leave it alone until then. A durable agent's
sandbox is kept the same way (:mod:`~opensandbox_provider.sandbox._parking`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opensandbox.sync.manager import SandboxManagerSync

KEY = "airflow-kept-until"
"""The metadata key holding, in whole seconds since the epoch, when a kept sandbox may go."""
PARKED_KEY = "airflow-parked"
"""The metadata key naming, as a label, the slot of a durable agent's task a sandbox serves."""
# Whole seconds since the epoch: a metadata value follows Kubernetes label rules, so no colon.
_SECONDS = re.compile(r"[0-9]{1,12}")


def kept_until(metadata: Mapping[str, str]) -> datetime | None:
    """When a kept sandbox may go, or ``None`` for one not kept (or whose mark is unreadable)."""
    value = metadata.get(KEY)
    if value is None or not _SECONDS.fullmatch(value):
        return None
    return datetime.fromtimestamp(int(value), tz=UTC)


def still_kept(until: datetime | None, now: datetime | None = None) -> bool:
    """Whether a sandbox kept until ``until`` is still to be left alone."""
    return until is not None and until > (now or datetime.now(UTC))


def keep(manager: SandboxManagerSync, sandbox_id: str, seconds: float) -> datetime:
    """Move the expiry of ``sandbox_id`` to ``seconds`` from now and mark it kept until then;
    return when it goes. SDK errors pass through, for the caller to translate."""
    until: datetime = manager.renew_sandbox(sandbox_id, timedelta(seconds=seconds)).expires_at
    manager.patch_sandbox_metadata(sandbox_id, {KEY: str(int(until.timestamp()))})
    return until
