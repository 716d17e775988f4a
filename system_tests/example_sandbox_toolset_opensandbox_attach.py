"""
System test: one task provisions a sandbox, an agent task attaches to it, a third collects.

* ``provision`` creates a sandbox owned by this Dag run (``dag_run_owner(context)``), with
  a working directory, and returns its handle.
* ``agent`` is an ``AgentOperator`` whose ``SandboxToolset`` attaches to that handle, taken
  from XCom through ``attach_to="{{ ti.xcom_pull('provision') }}"``. A scripted pydantic-ai
  ``FunctionModel`` plays the model: it writes files with relative paths, which land in
  the working directory the provisioning task chose, and checks every result.
* ``collect`` reads the files back by the same relative paths, checks that the agent gave
  up its claim, destroys the sandbox and checks with the server that it is gone. Its last
  log line is ``sandbox attach e2e passed``.

Its prepared-environment variant, ``example_sandbox_toolset_opensandbox_attach_prepared``,
first makes a snapshot: ``prepare`` runs a set-up in a sandbox of its own and snapshots it
(``prepare_snapshot``). ``provision`` starts the sandbox from that snapshot, the agent's first
command uses what the set-up made, and ``collect`` also deletes the snapshot, which was made
for this run alone. Its last log line is ``sandbox attach prepared e2e passed``.

Needs an ``opensandbox_default`` connection to an OpenSandbox server. Run it with
``airflow dags test example_sandbox_toolset_opensandbox_attach`` (or ``..._prepared``) or
trigger it from the UI.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from functools import cached_property

from airflow.providers.common.ai.hooks.pydantic_ai import PydanticAIHook
from airflow.providers.common.ai.operators.agent import AgentOperator
from airflow.providers.common.ai.toolsets import SandboxToolset

# common-compat's names are airflow.sdk's on Airflow 3 and airflow.decorators' on 2.11, so
# this one Dag runs on every Airflow line the provider supports (docs/compatibility.rst).
from airflow.providers.common.compat.sdk import dag, task
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from opensandbox_provider.sandbox import OpenSandboxBackend

DAG_ID = "example_sandbox_toolset_opensandbox_attach"
PREPARED_DAG_ID = f"{DAG_ID}_prepared"
PASSED = "sandbox attach e2e passed"
PREPARED_PASSED = "sandbox attach prepared e2e passed"
CONN_ID = "opensandbox_default"
WORKDIR = "/home/agent/work"
FINDINGS = "# Findings\n\nThe answer is 42.\n"

# What the attach Dag and its prepared variant have alike.
DAG_ARGS: dict = {
    "schedule": None,
    "start_date": datetime(2026, 1, 1, tzinfo=UTC),
    "catchup": False,
    "tags": ["opensandbox", "sandbox", "system_test"],
}

# Named for the Dag, not the module: Airflow imports this file under a generated module name.
log = logging.getLogger(DAG_ID)

# Each step: the tool the agent calls, its arguments, and what its result must contain.
STEPS = [
    ("run_command", {"command": "pwd"}, [f"[stdout]\n{WORKDIR}"]),
    (
        "write_file",
        {"path": "notes/findings.md", "content": FINDINGS},
        [f"Wrote {len(FINDINGS)} bytes"],
    ),
    (
        "run_command",
        {"command": "python3 -c 'print(6 * 7)' > answer.txt && cat answer.txt"},
        ["[stdout]\n42"],
    ),
    ("list_directory", {"path": "."}, ["answer.txt", "notes"]),
]
# The prepared variant's set-up, which needs no network: a module the agent's command imports.
SET_UP = ["mkdir -p /opt/prepared && echo 'ANSWER = 42' > /opt/prepared/prepared.py"]
PREPARED_COMMAND = "PYTHONPATH=/opt/prepared python3 -c 'import prepared; print(prepared.ANSWER)'"
PREPARED_STEPS = [
    ("run_command", {"command": PREPARED_COMMAND}, ["[stdout]\n42"]),
    *STEPS,
]


def scripted_agent(steps: list) -> FunctionModel:
    """A model that calls the tools of ``steps`` in order, failing the task on the first wrong
    result."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # A tool that raised ModelRetry comes back as a retry prompt, not a tool return.
        results = [
            str(part.content)
            for message in messages
            for part in message.parts
            if part.part_kind in ("tool-return", "retry-prompt")
        ]
        if results:
            tool, args, expected = steps[len(results) - 1]
            missing = [text for text in expected if text not in results[-1]]
            if missing:
                raise RuntimeError(f"{tool}({args}) returned {results[-1]!r}, lacking {missing!r}.")
            log.info("Tool %s returned as expected: %r", tool, results[-1])
        if len(results) == len(steps):
            return ModelResponse(parts=[TextPart(content="The findings are in notes/findings.md.")])
        tool, args, _ = steps[len(results)]
        log.info("Tool call %d/%d: %s(%s)", len(results) + 1, len(steps), tool, args)
        return ModelResponse(
            parts=[ToolCallPart(tool_name=tool, args=args, tool_call_id=f"step-{len(results)}")]
        )

    return FunctionModel(answer)


class ScriptedModelHook(PydanticAIHook):
    """The pydantic-ai hook, answering with :func:`scripted_agent` instead of a connection's LLM."""

    def __init__(self, steps: list) -> None:
        super().__init__()
        self.steps = steps

    def get_conn(self) -> FunctionModel:
        return scripted_agent(self.steps)


class ScriptedAgentOperator(AgentOperator):
    """``AgentOperator`` with the scripted model, so the Dag runs with no LLM and no key."""

    def __init__(self, *, steps: list, **kwargs) -> None:
        super().__init__(**kwargs)
        self.steps = steps

    @cached_property
    def llm_hook(self) -> PydanticAIHook:
        return ScriptedModelHook(self.steps)


def collect_and_destroy(handle: str) -> None:
    """Check the agent's files and its released claim, destroy the sandbox and check with the
    server that it is gone."""
    from airflow.providers.common.ai.sandbox.base import HOLDER_TAG, OWNER_TAG
    from opensandbox.exceptions import SandboxApiException
    from opensandbox.sync.manager import SandboxManagerSync

    from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

    backend = OpenSandboxBackend(CONN_ID)
    try:
        tags = backend.read_tags(handle)
        if HOLDER_TAG in tags:
            raise RuntimeError(f"The agent task still holds {handle}: {tags[HOLDER_TAG]!r}.")
        log.info("Sandbox %s is owned by %s and held by nobody.", handle, tags[OWNER_TAG])
        # Relative paths resolve in the working directory the sandbox was provisioned with.
        findings = backend.read_file(handle, "notes/findings.md", max_bytes=1024).decode()
        answer = backend.read_file(handle, "answer.txt", max_bytes=1024).decode()
    finally:
        backend.destroy(handle)
    if findings != FINDINGS or answer != "42\n":
        raise RuntimeError(f"The agent left {findings!r} and {answer!r}.")
    log.info("Read back what the agent wrote: %r, %r", findings, answer)
    manager = SandboxManagerSync.create(OpenSandboxHook(CONN_ID).connection_config)
    try:
        manager.get_sandbox_info(handle)
    except SandboxApiException as error:
        if error.status_code != 404:
            raise
        log.info("Sandbox %s is gone from the server after the teardown.", handle)
    else:
        raise RuntimeError(f"Sandbox {handle} is still on the server after the teardown.")
    finally:
        manager.close()


def provision_sandbox(context: dict, snapshot: str | None = None) -> str:
    from airflow.providers.common.ai.sandbox import SandboxSpec, dag_run_owner

    backend = OpenSandboxBackend(CONN_ID, workdir=WORKDIR, snapshot=snapshot)
    # Owned by this Dag run: the agent task attaches by presenting the same run. An open
    # spec sends no network policy, so this runs on a server without the egress sidecar.
    handle = backend.create(spec=SandboxSpec(block_network=False, owner=dag_run_owner(context)))
    log.info("Provisioned sandbox %s for %s.", handle, dag_run_owner(context))
    return handle


def attaching_agent(steps: list) -> ScriptedAgentOperator:
    return ScriptedAgentOperator(
        task_id="agent",
        steps=steps,
        prompt="Write your findings to notes/findings.md and the answer to answer.txt.",
        llm_conn_id="scripted",
        toolsets=[
            # The handle travels by XCom; the toolset claims the sandbox for this task, keeps
            # its lease renewed while the agent works, and leaves it standing at the end.
            SandboxToolset(
                OpenSandboxBackend(CONN_ID), attach_to="{{ ti.xcom_pull('provision') }}"
            ),
        ],
    )


@dag(dag_id=DAG_ID, **DAG_ARGS)
def example_sandbox_toolset_opensandbox_attach():
    @task
    def provision(**context) -> str:
        return provision_sandbox(context)

    @task
    def collect(handle: str) -> str:
        collect_and_destroy(handle)
        log.info(PASSED)
        return PASSED

    handle = provision()
    handle >> attaching_agent(STEPS) >> collect(handle)


@dag(dag_id=PREPARED_DAG_ID, **DAG_ARGS)
def example_sandbox_toolset_opensandbox_attach_prepared():
    @task
    def prepare() -> str:
        from opensandbox_provider.sandbox import prepare_snapshot

        snapshot = prepare_snapshot(OpenSandboxBackend(CONN_ID), SET_UP)
        log.info("Prepared snapshot %s.", snapshot)
        return snapshot

    @task
    def provision(snapshot: str, **context) -> str:
        return provision_sandbox(context, snapshot)

    @task
    def collect(handle: str, snapshot: str) -> str:
        from opensandbox_provider.sandbox import delete_snapshot

        collect_and_destroy(handle)
        # Made for this run alone, so it goes with the run.
        delete_snapshot(OpenSandboxBackend(CONN_ID), snapshot)
        log.info("Deleted snapshot %s.", snapshot)
        log.info(PREPARED_PASSED)
        return PREPARED_PASSED

    snapshot = prepare()
    handle = provision(snapshot)
    handle >> attaching_agent(PREPARED_STEPS) >> collect(handle, snapshot)


dag = example_sandbox_toolset_opensandbox_attach()
prepared_dag = example_sandbox_toolset_opensandbox_attach_prepared()

if __name__ == "__main__":
    dag.test()
