"""
The cleanup of leaked sandboxes, those whose task instance no try will use again, and of the
prepared snapshots no task has used for a set time.

:func:`cleanup_dag` builds a ready Dag; :class:`OpenSandboxCleanupOperator` is its one task,
for a Dag of your own.
"""

from opensandbox_provider.maintenance.dag import cleanup_dag
from opensandbox_provider.maintenance.operator import OpenSandboxCleanupOperator

__all__ = ["OpenSandboxCleanupOperator", "cleanup_dag"]
