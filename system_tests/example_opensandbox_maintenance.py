"""
Example and system test: the cleanup Dag the package ships, which kills the sandboxes this
provider made whose task instance no try will use again.

A sandbox is destroyed by the task that made it, and one nothing renews ends with its lease;
what this catches is a sandbox whose task ended without destroying it and whose lease is long
(a worker killed outright while the sandbox was made with a ``sandbox_timeout`` of hours, a
sandbox renewed by hand). Each sandbox carries the identity of the task instance that created
it; the task asks Airflow, through the Task SDK, for that task instance's state, and kills the
sandbox only when the state is finished, failed with retries left, cleared or gone. Then it
removes this deployment's prepared snapshots that no task has used for a week.

Needs Airflow 3 and an ``opensandbox_default`` connection (type ``opensandbox``). Run it with
``airflow dags test example_opensandbox_maintenance``, or give it a schedule
(docs/operator.rst, "Cleaning up leaked sandboxes").
"""

from __future__ import annotations

from opensandbox_provider.maintenance import cleanup_dag

DAG_ID = "example_opensandbox_maintenance"

dag = cleanup_dag(DAG_ID, schedule=None, tags=["opensandbox", "maintenance", "system_test"])
