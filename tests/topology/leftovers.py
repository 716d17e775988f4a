"""What one Airflow run's sandboxes left on the Docker engine, whatever other tests make there
meanwhile: the topology's tests run beside the rest of the suite (tests/work_units.py)."""

from __future__ import annotations

from dev.stack import leaks
from opensandbox_provider._identity import identity_metadata


def run_leftovers(dag_id: str, run_id: str) -> list[leaks.Resource]:
    """The containers of the sandboxes ``dag_id``'s run ``run_id`` made that are still there
    after a short grace: a task stamps its Dag and run on every sandbox it creates."""
    return leaks.leftovers_of(identity_metadata({"dag_id": dag_id, "run_id": run_id}))
