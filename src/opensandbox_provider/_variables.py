"""
Airflow Variables, read and written the same way from every process of a deployment.

A task or trigger of Airflow 3 reaches Variables only through the Task SDK, which asks the API
server; the api-server, a pool's keeper and every process of Airflow 2 reach the metadata
database directly. Both land in the same table, so what one kind of process writes the other
reads: that table is the one store every process of a deployment shares.
"""

from __future__ import annotations

from typing import Any


def read(key: str) -> str | None:
    """The Variable ``key``'s value, or ``None`` when there is none."""
    # The default by position: the Task SDK names it ``default``, the model ``default_var``.
    value = _variable().get(key, None)
    return None if value is None else str(value)


def write(key: str, value: str, *, description: str) -> None:
    """Set the Variable ``key`` to ``value``, made or replaced."""
    _variable().set(key, value, description=description)


def delete(key: str) -> None:
    """Delete the Variable ``key``; one already gone is as deleted."""
    # Airflow 3.0's Task SDK has no way to delete a Variable: the row is left, holding a key
    # nothing reads again.
    remove = getattr(_variable(), "delete", None)
    if remove is not None:
        remove(key)


def _variable() -> Any:
    """The Task SDK's ``Variable`` in a task or trigger of Airflow 3, else the database's."""
    if under_task_sdk():
        from airflow.sdk import Variable

        return Variable
    from airflow.models.variable import Variable as VariableRow

    return VariableRow


def under_task_sdk() -> bool:
    """Whether this is a task or trigger of Airflow 3, which reaches Variables only by its API."""
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:  # Airflow 2: every process reaches the database.
        return False
    comms: Any = getattr(task_runner, "SUPERVISOR_COMMS", None)
    return comms is not None
