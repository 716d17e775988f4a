"""
What becomes of a task's sandbox when the task ends: destroyed, or kept for someone to look into.

The names are KubernetesPodOperator's ``on_finish_action`` values, with its meanings, so that a
Dag moved from KPO keeps its setting and its readers know it at sight: a "pod" here is the
task's sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

DELETE_POD = "delete_pod"
DELETE_SUCCEEDED_POD = "delete_succeeded_pod"
KEEP_POD = "keep_pod"
ACTIONS = (DELETE_POD, DELETE_SUCCEEDED_POD, KEEP_POD)
# How long a kept sandbox is kept unless the task says: a working session's time to look.
DEFAULT_KEEP_FOR = timedelta(hours=1)
# The XCom key a kept sandbox is described under.
KEPT_SANDBOX_XCOM = "kept_sandbox"


def check_finish_action(action: Any, keep_for: Any) -> tuple[str, timedelta]:
    """``on_finish_action`` and ``keep_for``, refused when the Dag is parsed if they are wrong."""
    if action not in ACTIONS:
        raise ValueError(
            f"on_finish_action is {action!r}; give one of {', '.join(map(repr, ACTIONS))}, "
            "with KubernetesPodOperator's meanings."
        )
    if not isinstance(keep_for, timedelta) or keep_for <= timedelta(0):
        raise ValueError(
            f"keep_for is {keep_for!r}; give a positive timedelta, such as timedelta(hours=1)."
        )
    return action, keep_for


def keeps(action: str, *, failed: bool) -> bool:
    """Whether a task that ended so keeps its sandbox (a skipped task did not fail)."""
    return action == KEEP_POD or (action == DELETE_SUCCEEDED_POD and failed)


@dataclass(frozen=True)
class KeptSandbox:
    """A kept sandbox, as the task log and the XCom tell of it."""

    sandbox_id: str
    kept_until: datetime
    conn_id: str | None

    def reach(self) -> str:
        """One line of Python that runs a command in the sandbox, for a first look."""
        return (
            "from opensandbox_provider.sandbox import OpenSandboxBackend; "
            f"print(OpenSandboxBackend({self.conn_id!r}).run_command({self.sandbox_id!r}, "
            "'ls -la', timeout=60, max_output_bytes=65536).stdout)"
        )

    def xcom(self) -> dict[str, str]:
        return {
            "sandbox_id": self.sandbox_id,
            "kept_until": self.kept_until.isoformat(),
            "reach": self.reach(),
        }
