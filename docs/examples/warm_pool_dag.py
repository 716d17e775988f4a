"""A warm pool passed to the backend, the operator and the decorator: docs/pools.rst, "Using a
pool"."""

# [START using]
from airflow.providers.common.ai.toolsets import SandboxToolset
from airflow.sdk import dag, task
from my_pools import PYTHON

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.sandbox import OpenSandboxBackend

toolset = SandboxToolset(
    OpenSandboxBackend(image="python:3.12-slim", warm_pool=PYTHON), spec=PYTHON.spec
)


@dag(schedule=None)
def pooled():
    OpenSandboxOperator(task_id="test", command="pytest", spec=PYTHON.spec, warm_pool=PYTHON)

    @task.opensandbox(spec=PYTHON.spec, warm_pool=PYTHON)
    def check() -> int:
        import sys

        return sys.version_info.minor

    check()


pooled()
# [END using]
