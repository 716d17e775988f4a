"""A real pydantic-ai agent drives all four toolset tools through this backend on the real server.

The model is scripted (``tests/scripted_model.py``), so what is under test is everything
between its tool calls and the sandbox: the toolset, the backend, the SDK and the server.
It runs the upstream system test's steps in a sandbox with the toolset's default spec,
which denies all egress, so the fail-closed check runs too.
"""

from __future__ import annotations

import asyncio

from airflow.providers.common.ai.toolsets.sandbox import SandboxToolset
from pydantic_ai import Agent

from tests.scripted_model import scripted_model, tool_returns

SCRIPT = [
    ("write_file", {"path": "work/input.txt", "content": "6 * 7\n"}),
    ("run_command", {"command": "cat work/input.txt && python3 -c 'print(6 * 7)'"}),
    ("read_file", {"path": "work/input.txt"}),
    ("run_command", {"command": "echo broken >&2; exit 3"}),
    ("list_directory", {"path": "work"}),
]


def test_an_agent_drives_all_four_tools_through_the_backend(backend_on, dns_nft_server) -> None:
    backend = backend_on(dns_nft_server)
    created: list[str] = []
    create = backend.create

    def recording_create(*, spec=None):
        created.append(create(spec=spec))
        return created[-1]

    backend.create = recording_create  # type: ignore[method-assign]
    agent = Agent(
        scripted_model(SCRIPT, lambda returns: "done"), toolsets=[SandboxToolset(backend)]
    )
    try:
        result = asyncio.run(agent.run("Compute 6 * 7 in the sandbox."))
        # Asked before the cleanup below, which would otherwise be what destroyed it.
        left_behind = [handle for handle in created if dns_nft_server.has_sandbox(handle)]
    finally:
        for handle in created:
            backend.destroy(handle)

    assert result.output == "done"
    returns = [part.content for part in tool_returns(result.all_messages())]
    assert returns == [
        "Wrote 6 bytes to 'work/input.txt'.",
        "[stdout]\n6 * 7\n42",
        "6 * 7",
        "[stderr]\nbroken\n[exit code: 3]",
        "input.txt",
    ]
    # One sandbox for the whole run, destroyed by the toolset when the run ended.
    assert len(created) == 1
    assert left_behind == []
