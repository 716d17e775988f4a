"""The warm pool a local Airflow's OpenSandboxExecutor draws its tries' sandboxes from
(tests/airflow_path/test_executor.py, ``make bench``), defined as a deployment would define it:
with the spec the executor makes each try's sandbox with, read from the same
``[opensandbox_executor]`` options in the scheduler and in the keeper.

:func:`dev.airflow_stack.executor_site.with_warm_pool` links this file into the Airflow's Dags
folder and sets the three variables it reads its name, Redis and size from; the keeper runs
from there. Nothing imports it otherwise: it reads the options of that Airflow.

It imports no Dag file, not even for a shared name: Airflow's Dag processor registers every Dag
created while it imports a file as that file's, so Dags made by such an import would be
recorded as this file's, and their tries would parse this file instead of theirs."""

from __future__ import annotations

import os

from airflow.configuration import conf

from opensandbox_provider.executors import sandbox_spec
from opensandbox_provider.pool import WarmPool

TRIES = WarmPool(
    os.environ["OPENSANDBOX_EXECUTOR_POOL_NAME"],
    size=int(os.environ["OPENSANDBOX_EXECUTOR_POOL_SIZE"]),
    store=os.environ["OPENSANDBOX_EXECUTOR_POOL_STORE"],
    image=os.environ["AIRFLOW__OPENSANDBOX_EXECUTOR__IMAGE"],
    spec=sandbox_spec(),
    # The executor's connection: a pool on another is not the one its tries may draw from.
    opensandbox_conn_id=conf.get("opensandbox_executor", "opensandbox_conn_id"),
    # Short, so that an idle sandbox an interrupted run left behind ends soon by itself.
    idle_lease=120,
)
