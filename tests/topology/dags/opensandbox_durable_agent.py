"""A durable agent in a plain ``@task``, retried: common-ai's ``AirflowDurability`` replays what
its first try did in the sandbox, and the retry must find it there.

The model is a script. It writes ``notes.txt`` and appends a line to it; then, on the first
try, it fails (or hangs, for a test to SIGKILL the worker under it), and on the retry, after
the journal has replayed those two calls without running them, it reads the file back. The
task logs what it read, so a test sees whether the retry ran in the sandbox the calls were
made in: both lines, once each.

``opensandbox_durable_agent`` runs two such tasks under ``airflow dags test``: ``agent``, and
``agent_whose_sandbox_went``, whose retry first kills the sandbox its first try parked, as a
lease running out would. ``opensandbox_durable_agent_lost_worker`` runs one whose first try
hangs, on the celery topology.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task

DAG_ID = "opensandbox_durable_agent"
LOST_WORKER_DAG_ID = "opensandbox_durable_agent_lost_worker"
TASK_ID = "agent"
GONE_TASK_ID = "agent_whose_sandbox_went"
FIRST_TRY_FAILS = "the first try fails after its two calls"
FIRST_TRY_HANGS = "the first try hangs after its two calls"
READ_BACK = "the retry read back:"
WRITE = ("write_file", {"path": "notes.txt", "content": "first\n"})
APPEND = ("run_command", {"command": "echo second >> notes.txt"})
READ = ("run_command", {"command": "cat notes.txt"})
# Long enough that only the SIGKILL ends it.
HANG_SECONDS = 3600

log = logging.getLogger(DAG_ID)


def run_agent(*, first_try_hangs: bool, kill_parked: bool) -> str:
    """Run the scripted durable agent in a sandbox of the toolset's own; what it read back."""
    from airflow.providers.common.ai.durable import AirflowDurability
    from airflow.providers.common.ai.toolsets import SandboxToolset
    from airflow.sdk import get_current_context
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from opensandbox_provider.sandbox import OpenSandboxBackend

    ti = get_current_context()["ti"]
    if kill_parked and ti.try_number > 1:
        _kill_parked(ti)

    def model(messages, info) -> ModelResponse:
        returns = [
            part
            for message in messages
            for part in getattr(message, "parts", ())
            if isinstance(part, ToolReturnPart)
        ]
        done = len(returns)
        if done < 2:
            name, args = (WRITE, APPEND)[done]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{done}")])
        if ti.try_number == 1 and first_try_hangs:
            log.info(FIRST_TRY_HANGS)
            time.sleep(HANG_SECONDS)
        if ti.try_number == 1:
            raise RuntimeError(FIRST_TRY_FAILS)
        if done == 2:
            name, args = READ
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id="call-2")])
        return ModelResponse(parts=[TextPart(str(returns[-1].content))])

    agent = Agent(
        FunctionModel(model),
        name="notes",
        toolsets=[SandboxToolset(OpenSandboxBackend(), spec=SandboxSpec(block_network=False))],
        capabilities=[AirflowDurability()],
    )
    answer = agent.run_sync("Keep notes in the sandbox.").output
    log.info("%s %r", READ_BACK, answer)
    return answer


def _kill_parked(ti) -> None:
    """Kill what the first try parked, as its lease running out would, before the agent runs."""
    from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

    hook = OpenSandboxHook()
    found = hook.list_sandboxes(dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id)
    for sandbox in found:
        if sandbox.parked_for is not None and hook.kill_sandbox(sandbox.id):
            log.info("Killed sandbox %s, parked by the first try.", sandbox.id)


@dag(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_durable_agent():
    @task(task_id=TASK_ID, retries=1, retry_delay=timedelta(0))
    def agent() -> str:
        return run_agent(first_try_hangs=False, kill_parked=False)

    @task(task_id=GONE_TASK_ID, retries=1, retry_delay=timedelta(0))
    def agent_whose_sandbox_went() -> str:
        return run_agent(first_try_hangs=False, kill_parked=True)

    agent()
    agent_whose_sandbox_went()


@dag(LOST_WORKER_DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_durable_agent_lost_worker():
    @task(task_id=TASK_ID, retries=1, retry_delay=timedelta(seconds=1))
    def agent() -> str:
        return run_agent(first_try_hangs=True, kill_parked=False)

    agent()


opensandbox_durable_agent()
opensandbox_durable_agent_lost_worker()
