"""A warm pool defined once, in a module the Dags and the keeper both import: docs/pools.rst,
"Defining a pool". warm_pool_dag.py imports it, as a Dag of the same folder would."""

# [START my_pools]
from airflow.providers.common.ai.sandbox import SandboxSpec

from opensandbox_provider.pool import WarmPool

PYTHON = WarmPool(
    "python",
    size=4,
    store="redis_pools",  # an Airflow connection to Redis, or a redis:// URL
    image="python:3.12-slim",
    cpu="1",
    memory="2Gi",
    spec=SandboxSpec(allow_egress_to=["packages.example.internal"]),
)
# [END my_pools]
