"""The warm pool test_executor.py's Airflow draws its tries' sandboxes from, defined as a
deployment would define it: with the spec the executor makes each try's sandbox with, read from
the same ``[opensandbox_executor]`` options in the scheduler and in the keeper.

The test links this file into the Airflow's Dags folder, beside the Dag file whose names it
shares, which Airflow puts on every component's path, and runs the keeper from there. The test
never imports it: it reads the options of that Airflow."""

from __future__ import annotations

import os

from executor_dag import POOL_NAME, POOL_STORE_VARIABLE

from opensandbox_provider.executors import sandbox_spec
from opensandbox_provider.pool import WarmPool

TRIES = WarmPool(
    POOL_NAME,
    size=1,
    store=os.environ[POOL_STORE_VARIABLE],
    image=os.environ["AIRFLOW__OPENSANDBOX_EXECUTOR__IMAGE"],
    spec=sandbox_spec(),
    # Short, so that an idle sandbox a failed test left behind ends soon by itself.
    idle_lease=120,
)
