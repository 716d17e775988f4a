"""A command's output cannot run the worker out of memory, measured end to end on the real server.

A child process stands in for the worker: it reconnects to a sandbox by handle and runs one
command through the backend, and measures its peak resident set across that command alone
(``tests/peak_memory.py``).
"""

from __future__ import annotations

import os
import textwrap

import pytest

from tests.peak_memory import run_child

BUDGET = 50 * 1024  # the toolset's default per-stream budget
# The worker-memory goal is 32 MiB; twice that leaves room for the allocator and the HTTP stack
# without letting a worker that held the output, or any large part of it, pass.
LIMIT = 64 * 1024 * 1024

WORKER = textwrap.dedent(
    """
    import sys
    from opensandbox_provider.sandbox import OpenSandboxBackend
    from tests.peak_memory import peak_rss_delta, report

    handle, command, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
    backend = OpenSandboxBackend()
    backend.run_command(handle, "echo warm", timeout=30, max_output_bytes=budget)
    result, delta = peak_rss_delta(
        lambda: backend.run_command(handle, command, timeout=600, max_output_bytes=budget)
    )
    report(
        delta=delta,
        stdout=len(result.stdout.encode()),
        truncated=result.stdout_truncated,
        exit_code=result.exit_code,
    )
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        # 256 MiB with no newline: one event.
        "head -c 268435456 /dev/zero | tr '\\0' a",
        # 100 MB of 8 KB lines.
        "yes \"$(head -c 8000 /dev/zero | tr '\\0' b)\" | head -c 100000000",
    ],
    ids=["one-line", "lines"],
)
def test_the_worker_holds_only_the_budget_of_a_huge_output(sandbox, plain_server, command) -> None:
    env = {**os.environ, **plain_server.airflow_connection_env("opensandbox_default")}
    measured = run_child(WORKER, sandbox.handle, command, str(BUDGET), timeout=900, env=env)
    assert measured["exit_code"] == 0
    assert measured["truncated"] and measured["stdout"] == BUDGET
    assert measured["delta"] < LIMIT, f"the worker grew by {measured['delta'] / 2**20:.1f} MiB"
