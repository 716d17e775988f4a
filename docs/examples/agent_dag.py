"""An agent task whose shell and file tools run in an OpenSandbox sandbox that reaches one host.

The README shows it, as a copy (the package index renders no ``literalinclude``), between the
markers below; tests/docs/test_readme.py fails when the copy and this file differ, and
tests/docs/test_examples.py parses this file as the dag-processor does.
"""

# [START readme]
from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.providers.common.ai.toolsets import SandboxToolset
from airflow.sdk import dag, task

from opensandbox_provider.sandbox import OpenSandboxBackend

sandbox = SandboxToolset(
    OpenSandboxBackend(opensandbox_conn_id="opensandbox_default"),
    # Only this host: refused unless the server's egress sidecar runs in dns+nft mode.
    spec=SandboxSpec(allow_egress_to=["data.example.com"]),
)


@dag(schedule=None)
def analyse():
    @task.agent(llm_conn_id="pydanticai_default", toolsets=[sandbox])
    def explore() -> str:
        return "Download https://data.example.com/sales.csv and summarise it with Python."

    explore()


analyse()
# [END readme]
