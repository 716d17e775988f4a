"""Calls the docs show made on sandboxes that already exist, each a function that makes them
between its markers: tests/integration/test_docs_examples.py runs them on the local stack."""


def look_into_a_kept_sandbox(sandbox_id: str) -> None:
    """docs/operator.rst, "Keeping a sandbox after the task": the task log's line, wrapped."""
    # [START reach]
    from opensandbox_provider.sandbox import OpenSandboxBackend

    print(
        OpenSandboxBackend("opensandbox_default")
        .run_command(sandbox_id, "ls -la", timeout=60, max_output_bytes=65536)
        .stdout
    )
    # [END reach]


def list_renew_and_kill(run_id: str, sandbox_id: str) -> None:
    """docs/operator.rst: the hook lists a Dag run's sandboxes, renews one and kills it."""
    # [START hook]
    from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

    hook = OpenSandboxHook()
    for sandbox in hook.list_sandboxes(dag_id="reports", run_id=run_id, states=["Running"]):
        print(sandbox.id, sandbox.identity.task_id, sandbox.expires_at)
    hook.renew_sandbox(sandbox_id, 3600)
    hook.kill_sandbox(sandbox_id)
    # [END hook]
