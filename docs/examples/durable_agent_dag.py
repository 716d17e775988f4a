"""A durable agent in a plain ``@task``, whose sandbox this backend keeps for the retry:
docs/backend.rst, "A durable agent's sandbox"."""

# [START durable_agent]
from datetime import timedelta

from airflow.providers.common.ai.durable import AirflowDurability
from airflow.providers.common.ai.toolsets import SandboxToolset
from airflow.sdk import dag, task
from pydantic_ai import Agent

from opensandbox_provider.sandbox import OpenSandboxBackend


@task(retries=2, retry_delay=timedelta(minutes=1))
def analyse(question: str) -> str:
    agent = Agent(
        "anthropic:claude-sonnet-4-5",
        name="analyst",
        toolsets=[SandboxToolset(OpenSandboxBackend())],
        capabilities=[AirflowDurability()],
    )
    return agent.run_sync(question).output


@dag(schedule=None)
def durable_analysis():
    analyse("Which region sold most last quarter?")


durable_analysis()
# [END durable_agent]
