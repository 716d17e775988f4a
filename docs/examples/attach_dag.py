"""A sandbox provisioned for its Dag run, attached to by an agent task, read out and destroyed by
a later task: docs/attach.rst, "Attaching to a provisioned sandbox"."""

# [START attach]
from airflow.providers.common.ai.operators.agent import AgentOperator
from airflow.providers.common.ai.sandbox import SandboxSpec, dag_run_owner
from airflow.providers.common.ai.toolsets import SandboxToolset
from airflow.sdk import dag, task

from opensandbox_provider.sandbox import OpenSandboxBackend


@task
def provision(**context) -> str:
    backend = OpenSandboxBackend(workdir="/home/agent/work")
    return backend.create(spec=SandboxSpec(owner=dag_run_owner(context)))


@task
def collect(sandbox: str) -> str:
    backend = OpenSandboxBackend()
    try:
        return backend.read_file(sandbox, "notes/findings.md", max_bytes=1 << 20).decode()
    finally:
        backend.destroy(sandbox)


@dag(schedule=None)
def findings():
    sandbox = provision()
    analyse = AgentOperator(
        task_id="analyse",
        prompt="Write your findings to notes/findings.md.",
        llm_conn_id="pydanticai_default",
        toolsets=[
            SandboxToolset(OpenSandboxBackend(), attach_to="{{ ti.xcom_pull('provision') }}"),
        ],
    )
    sandbox >> analyse >> collect(sandbox)


findings()
# [END attach]
