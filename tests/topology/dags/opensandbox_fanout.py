"""Many sandboxes at once: ``OpenSandboxOperator`` tasks and agent tasks, each mapped over a
list, so that there is work for several workers."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Param, dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_fanout"
OPERATOR_TASK_ID = "run"
AGENT_TASK_ID = "agent"
# The most tasks a run may ask for, all of them allowed to run at once.
MAX_TASKS = 100
# An open spec: the local stack's plain server has no egress sidecar.
OPEN = SandboxSpec(block_network=False)

log = logging.getLogger(DAG_ID)


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    max_active_tasks=MAX_TASKS,
    params={
        "operators": Param(60, type="integer", minimum=0, maximum=MAX_TASKS),
        "agents": Param(10, type="integer", minimum=0, maximum=MAX_TASKS),
        "seconds": Param(2, type="integer", minimum=0),
    },
)
def opensandbox_fanout():
    @task
    def commands(params: dict) -> list[str]:
        # Each sandbox stays a few seconds, so that the tasks overlap and every worker gets some.
        return [f"echo task {n}; sleep {params['seconds']}" for n in range(params["operators"])]

    @task
    def agent_numbers(params: dict) -> list[int]:
        return list(range(params["agents"]))

    @task(task_id=AGENT_TASK_ID)
    def agent(number: int) -> str:
        # Imported in the task, not at parse time: the dag-processor never needs them.
        from airflow.providers.common.ai.toolsets import SandboxToolset
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        from opensandbox_provider.sandbox import OpenSandboxBackend

        expected = f"agent {number}"

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            # A scripted model: one command in the sandbox, then its output as the answer.
            results = [
                str(part.content)
                for message in messages
                for part in message.parts
                if part.part_kind == "tool-return"
            ]
            if results:
                return ModelResponse(parts=[TextPart(content=results[-1])])
            call = ToolCallPart(tool_name="run_command", args={"command": f"echo {expected}"})
            return ModelResponse(parts=[call])

        toolset = SandboxToolset(
            OpenSandboxBackend(opensandbox_conn_id="opensandbox_default"), spec=OPEN
        )
        output = Agent(FunctionModel(model), toolsets=[toolset]).run_sync("Run it.").output
        if expected not in output:
            raise RuntimeError(f"The agent's command printed {output!r}, not {expected!r}.")
        log.info("Agent %d ran its command: %r", number, output)
        return output

    OpenSandboxOperator.partial(
        task_id=OPERATOR_TASK_ID, spec=OPEN, cpu="100m", memory="256Mi"
    ).expand(command=commands())
    agent.expand(number=agent_numbers())


opensandbox_fanout()
