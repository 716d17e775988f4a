"""Sixteen agent runs at once from one worker process, sharing one backend as a Dag's tasks do.

What is right: every run gets its own sandbox and its own output (no run sees another's token),
every run succeeds, and every sandbox is destroyed when its run ends.
"""

from __future__ import annotations

import asyncio

from airflow.providers.common.ai.toolsets import SandboxToolset

from tests.containers import assert_no_container
from tests.reliability.bounded import within
from tests.reliability.conftest import OPEN, assert_key_hidden
from tests.reliability.scripted_agent import scripted_agent, succeeded

RUNS = 16
DEADLINE = 600.0


def test_sixteen_concurrent_agent_runs_all_succeed_in_sandboxes_of_their_own(
    make_backend, plain_server, sandboxes, caplog
):
    backend = make_backend(plain_server, use_server_proxy=False)
    create = backend.create

    def recording_create(*, spec=None):
        handle = create(spec=spec)
        sandboxes.append(handle)
        return handle

    backend.create = recording_create

    async def one(index: int) -> str:
        toolset = SandboxToolset(backend, spec=OPEN)
        result = await scripted_agent(f"run{index:02d}").run("Run it.", toolsets=[toolset])
        return result.output

    async def all_runs() -> list[str]:
        return await asyncio.gather(*(one(index) for index in range(RUNS)))

    outputs = within(DEADLINE, f"{RUNS} concurrent agent runs", lambda: asyncio.run(all_runs()))

    for index, output in enumerate(outputs):
        assert succeeded(output, f"run{index:02d}"), f"run {index} answered {output!r}"
        others = [f"run{other:02d} 42" for other in range(RUNS) if other != index]
        assert not any(token in output for token in others), f"run {index} saw another run's output"
    assert len(set(sandboxes)) == RUNS
    for handle in sandboxes:
        assert_no_container(handle)
    assert_key_hidden(plain_server.api_key, caplog)
