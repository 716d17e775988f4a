"""The ``opensandbox`` connections an api-server knows: its database's and its environment's."""

from __future__ import annotations

import os

from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

# How Airflow names a connection defined in the environment (AIRFLOW_CONN_<ID>).
_ENVIRONMENT_PREFIX = "AIRFLOW_CONN_"


def opensandbox_connection_ids() -> list[str]:
    """Every connection of type ``opensandbox``, by id, sorted; each is read by the hook."""
    return sorted(set(_from_database()) | set(_from_environment()))


def _from_database() -> list[str]:
    # Airflow has no public call that lists connections by type; the api-server's own routes
    # read them through this session and model, which tests/unit/test_airflow_internals.py
    # checks are still where this imports them from.
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(Connection.conn_id).where(Connection.conn_type == OpenSandboxHook.conn_type)
        return list(session.scalars(query))


def _from_environment() -> list[str]:
    from airflow.models.connection import Connection

    found = []
    for name, value in os.environ.items():
        if not name.startswith(_ENVIRONMENT_PREFIX):
            continue
        conn_id = name.removeprefix(_ENVIRONMENT_PREFIX).lower()
        # A value Airflow itself could not read is Airflow's to report, not this page's.
        try:
            connection = (
                Connection.from_json(value, conn_id=conn_id)
                if value.lstrip().startswith("{")
                else Connection(conn_id=conn_id, uri=value)
            )
        except ValueError:
            continue
        if connection.conn_type == OpenSandboxHook.conn_type:
            found.append(conn_id)
    return found
