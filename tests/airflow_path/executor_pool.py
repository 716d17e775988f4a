"""The warm pool test_executor.py's Airflow draws its tries' sandboxes from, defined as a
deployment would define it: with the spec the executor makes each try's sandbox with, read from
the same ``[opensandbox_executor]`` options in the scheduler and in the keeper.

The test links this file into the Airflow's Dags folder, beside the Dag file, and runs the keeper
from there. The test never imports it: it reads the options of that Airflow, and the pool's name
and store from the two variables the test sets.

It imports no Dag file, not even for a shared name: Airflow's Dag processor registers every Dag
created while it imports a file as that file's, so Dags made by importing executor_dag.py here
would be recorded as this file's, and their tries would parse this file instead of theirs."""

from __future__ import annotations

import os

from opensandbox_provider.executors import sandbox_spec
from opensandbox_provider.pool import WarmPool

TRIES = WarmPool(
    os.environ["OPENSANDBOX_EXECUTOR_POOL_NAME"],
    size=1,
    store=os.environ["OPENSANDBOX_EXECUTOR_POOL_STORE"],
    image=os.environ["AIRFLOW__OPENSANDBOX_EXECUTOR__IMAGE"],
    spec=sandbox_spec(),
    # Short, so that an idle sandbox a failed test left behind ends soon by itself.
    idle_lease=120,
)
