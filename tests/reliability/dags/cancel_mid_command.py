"""A Dag whose agent task is caught mid-command, for the cancellation case of the reliability suite.

The agent is scripted (no LLM): it writes a file, then runs a command that would take five
minutes. The test cancels the task while that command runs. Everything the run depends on
comes from the environment the test starts Airflow with: the OpenSandbox connection, the
sandbox image, and a token that marks the sandbox as this run's.
"""

import os
from datetime import datetime
from functools import cached_property

from airflow.providers.common.ai.operators.agent import AgentOperator
from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.providers.common.ai.toolsets import SandboxToolset
from airflow.sdk import dag

from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.reliability.scripted_agent import scripted_agent

TOKEN = os.environ.get("RELIABILITY_TOKEN", "unset")
LONG_COMMAND = f"echo {TOKEN}; sleep 300"


class _ScriptedModelHook:
    """Stands in for the LLM hook: the operator builds its agent through ``create_agent``."""

    def create_agent(self, **agent_options):
        return scripted_agent(TOKEN, command=LONG_COMMAND, **agent_options)


class ScriptedAgentOperator(AgentOperator):
    @cached_property
    def llm_hook(self):
        return _ScriptedModelHook()


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def cancel_mid_command():
    ScriptedAgentOperator(
        task_id="agent",
        prompt="Run the long command.",
        llm_conn_id="unused_scripted_model",
        toolsets=[
            SandboxToolset(
                OpenSandboxBackend(
                    "opensandbox_reliability", image=os.environ.get("RELIABILITY_IMAGE", "")
                ),
                spec=SandboxSpec(block_network=False, env={"RELIABILITY_TOKEN": TOKEN}),
                default_command_timeout=600,
                max_command_timeout=600,
            )
        ],
    )


cancel_mid_command()
