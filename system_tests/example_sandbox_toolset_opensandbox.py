"""
System test: ``SandboxToolset`` on ``OpenSandboxBackend``, end to end, with no LLM.

A scripted pydantic-ai ``FunctionModel`` plays the model. It calls each of the four sandbox
tools in the sequence the upstream system test used and checks every result before it makes
the next call, so the task fails on the first result that is wrong. The task then checks with
the server that the sandbox is gone, and its last log line is ``sandbox boundary e2e passed``.

Needs an ``opensandbox_default`` connection (type ``opensandbox``) to an OpenSandbox server;
``make demo`` creates one for the local stack. Run it with
``airflow dags test example_sandbox_toolset_opensandbox`` or trigger it from the UI.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from airflow.sdk import dag, task

DAG_ID = "example_sandbox_toolset_opensandbox"
PASSED = "sandbox boundary e2e passed"
WORKSPACE = "/srv/airflow-e2e"
GREETING = "hello from airflow"

# Named for the Dag, not the module: Airflow imports this file under a generated module name.
log = logging.getLogger(DAG_ID)


@dag(
    dag_id=DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["opensandbox", "sandbox", "system_test"],
)
def example_sandbox_toolset_opensandbox():
    @task
    def run_sandbox_agent() -> str:
        # Imported in the task, not at parse time: the dag-processor never needs them.
        from airflow.providers.common.ai.sandbox import SandboxSpec
        from airflow.providers.common.ai.toolsets import SandboxToolset
        from opensandbox.exceptions import SandboxApiException
        from opensandbox.sync.manager import SandboxManagerSync
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
        from opensandbox_provider.sandbox import OpenSandboxBackend

        class RecordingBackend(OpenSandboxBackend):
            """Remembers the sandboxes it created and destroyed, so the teardown can be checked."""

            def __init__(self, **kwargs) -> None:
                super().__init__(**kwargs)
                self.created: list[str] = []
                self.destroyed: list[str] = []

            def create(self, *, spec=None) -> str:
                handle = super().create(spec=spec)
                self.created.append(handle)
                return handle

            def destroy(self, sandbox: str) -> None:
                super().destroy(sandbox)
                self.destroyed.append(sandbox)

        greeting_path = f"{WORKSPACE}/greeting.txt"
        # Each step: the tool the model calls, its arguments, and what its result must contain.
        steps = [
            ("write_file", {"path": greeting_path, "content": f"{GREETING}\n"}, ["Wrote 19 bytes"]),
            (
                "run_command",
                {"command": f"cat {greeting_path} && python3 -c 'print(6 * 7)'"},
                [f"[stdout]\n{GREETING}\n42"],
            ),
            ("read_file", {"path": greeting_path}, [GREETING]),
            (
                "run_command",
                {"command": "echo to-stderr >&2; exit 3"},
                ["[stderr]\nto-stderr", "[exit code: 3]"],
            ),
            ("list_directory", {"path": WORKSPACE}, ["greeting.txt"]),
        ]

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            # A tool that raised ModelRetry comes back as a retry prompt, not a tool return;
            # counting both keeps a failed step from being re-issued until retries run out.
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
                    raise RuntimeError(
                        f"{tool}({args}) returned {results[-1]!r}, which lacks {missing!r}."
                    )
                log.info("Tool %s returned as expected: %r", tool, results[-1])
            if len(results) == len(steps):
                return ModelResponse(parts=[TextPart(content=PASSED)])
            tool, args, _ = steps[len(results)]
            log.info("Tool call %d/%d: %s(%s)", len(results) + 1, len(steps), tool, args)
            call = ToolCallPart(tool_name=tool, args=args, tool_call_id=f"step-{len(results)}")
            return ModelResponse(parts=[call])

        backend = RecordingBackend(opensandbox_conn_id="opensandbox_default")
        toolset = SandboxToolset(
            backend,
            # An open spec sends no network policy, so it runs on a server without the egress
            # sidecar, such as the local stack's "plain" server. The default spec denies all
            # egress, which such a server refuses to create.
            spec=SandboxSpec(block_network=False),
            # The toolset refuses a default above the ceiling: upstream, a 30 s ceiling with
            # the 60 s default kept this Dag from ever constructing.
            default_command_timeout=30.0,
            max_command_timeout=30.0,
        )
        agent = Agent(
            FunctionModel(model),
            instructions="Use the sandbox tools as requested.",
            toolsets=[toolset],
        )
        output = agent.run_sync("Run the sandbox boundary system test.").output
        if output != PASSED:
            raise RuntimeError(f"The agent finished with {output!r} instead of {PASSED!r}.")

        if len(backend.created) != 1 or backend.created != backend.destroyed:
            raise RuntimeError(
                f"Expected one sandbox created and destroyed; created {backend.created}, "
                f"destroyed {backend.destroyed}."
            )
        (handle,) = backend.created
        manager = SandboxManagerSync.create(OpenSandboxHook().connection_config)
        try:
            info = manager.get_sandbox_info(handle)
        except SandboxApiException as error:
            if error.status_code != 404:
                raise
            log.info("Sandbox %s is gone from the server after the teardown.", handle)
        else:
            raise RuntimeError(
                f"Sandbox {handle} is still on the server after the teardown, in state "
                f"{info.status.state!r}."
            )
        finally:
            manager.close()
        log.info(PASSED)
        return PASSED

    run_sandbox_agent()


dag = example_sandbox_toolset_opensandbox()

if __name__ == "__main__":
    dag.test()
