"""
Run in an Airflow home whose metadata database holds a Dag: two more runs of its one task, one
running and one a deferred task that its trigger's event resumed while no pool slot is free.
Prints the two run ids and the states Airflow gave them, as JSON.

The resumed one is made as Airflow makes it: deferred on a trigger, then the trigger's event
submitted through Airflow's own ``Trigger.submit_event``, which sets the task to ``scheduled``
and its ``next_method`` to resume it; its pool has no slot, so a scheduler would leave it so.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

from airflow.models.pool import Pool
from airflow.models.serialized_dag import SerializedDagModel
from airflow.models.trigger import Trigger
from airflow.triggers.base import TriggerEvent
from airflow.utils.session import create_session
from airflow.utils.state import DagRunState, TaskInstanceState
from airflow.utils.types import DagRunTriggeredByType, DagRunType

FULL_POOL = "opensandbox_no_free_slot"
TRIGGER = "opensandbox_provider.triggers.opensandbox.OpenSandboxCommandTrigger"


def main(dag_id: str, task_id: str) -> None:
    runs = {"running": "maintenance_running", "resumed": "maintenance_resumed"}
    with create_session() as session:
        dag = SerializedDagModel.get_dag(dag_id, session=session)
        assert dag is not None, f"{dag_id} is not in this home's database; run it once first."
        Pool.create_or_update_pool(
            FULL_POOL, slots=0, description="", include_deferred=False, session=session
        )
        instances = {}
        for day, (role, run_id) in enumerate(runs.items(), start=2):
            when = datetime(2026, 1, day, tzinfo=UTC)
            run = dag.create_dagrun(
                run_id=run_id,
                logical_date=when,
                data_interval=(when, when),
                run_after=when,
                run_type=DagRunType.MANUAL,
                triggered_by=DagRunTriggeredByType.TEST,
                state=DagRunState.RUNNING,
                session=session,
            )
            instances[role] = run.get_task_instance(task_id, session=session)
        instances["running"].state = TaskInstanceState.RUNNING
        trigger = Trigger(classpath=TRIGGER, kwargs={})
        session.add(trigger)
        session.flush()
        resumed = instances["resumed"]
        resumed.pool = FULL_POOL
        resumed.state = TaskInstanceState.DEFERRED
        resumed.trigger_id = trigger.id
        resumed.next_method = "execute_complete"
        session.flush()
        Trigger.submit_event(trigger.id, TriggerEvent({"status": "success"}), session=session)
        session.flush()
        states = {role: str(ti.state) for role, ti in instances.items()}
    print(json.dumps({"runs": runs, "states": states}))


if __name__ == "__main__":
    main(*sys.argv[1:])
