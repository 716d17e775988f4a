"""A warm pool the OpenSandboxExecutor's tries draw from: docs/executor.rst, "Warm pools".
tests/docs/test_examples.py imports it with the executor's options set."""

# [START executor_pools]
# my_pools.py
from opensandbox_provider.executors import sandbox_spec
from opensandbox_provider.pool import WarmPool

AIRFLOW_TRIES = WarmPool(
    "airflow-tries",
    size=4,
    store="redis_pools",
    image="registry.internal/airflow-worker:3.3.2",
    spec=sandbox_spec(),  # for Dags of the bundle "dags-folder"
)
# [END executor_pools]
