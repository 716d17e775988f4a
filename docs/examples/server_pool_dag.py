"""A Pool of OpenSandbox's Kubernetes controller, passed as ``warm_pool``: docs/pools.rst,
"Server pools"."""

# [START server_pool]
from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.providers.common.ai.toolsets import SandboxToolset
from airflow.sdk import dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.pool import ServerPool
from opensandbox_provider.sandbox import OpenSandboxBackend

PYTHON_PODS = ServerPool("python")

toolset = SandboxToolset(
    OpenSandboxBackend(warm_pool=PYTHON_PODS), spec=SandboxSpec(block_network=False)
)


@dag(schedule=None)
def server_pooled():
    OpenSandboxOperator(task_id="test", command="pytest", warm_pool=PYTHON_PODS)


server_pooled()
# [END server_pool]
