"""The demo's wait from asking for a sandbox to its first command, read from a task log."""

from __future__ import annotations

import pytest

from dev.airflow_stack.first_command import first_command_seconds


def event(timestamp: str, text: str) -> dict[str, str]:
    return {"timestamp": f"2026-12-04T04:11:{timestamp}Z", "event": text}


def test_the_wait_runs_from_the_ask_to_the_first_commands_start() -> None:
    log = [
        event("09.000", "::group::Pre Execute"),
        event(
            "15.078",
            "Took from warm pool example-operator OpenSandbox sandbox 2c89 from image "
            "python:3.12-slim with no network policy (egress open), in 2.07s.",
        ),
        event("15.119", "Sandbox 2c89 is ready: execd answered its health check after 0.03s."),
        event(
            "15.505",
            "Sandbox 2c89: 'echo first command' exited 0 in 0.06s (stdout 14 bytes; "
            "stderr 0 bytes).",
        ),
        event(
            "17.000",
            "Sandbox 2c89: 'echo second' exited 0 in 0.01s (stdout 7 bytes; stderr 0 bytes).",
        ),
    ]
    source, seconds = first_command_seconds(log) or ("", 0.0)
    # Asked at 13.008, first command started at 15.445.
    assert source == "warm pool"
    assert seconds == pytest.approx(2.437, abs=0.001)


def test_a_created_sandbox_is_cold_and_a_log_without_a_command_tells_nothing() -> None:
    created = event(
        "09.398",
        "Created OpenSandbox sandbox 5af5 from image python:3.12-slim "
        "with no network policy (egress open), in 1.37s.",
    )
    ran = event(
        "10.384",
        "Sandbox 5af5: 'echo first command' exited 0 in 0.03s (stdout 14 bytes; stderr 0 bytes).",
    )
    assert first_command_seconds([created, ran]) == ("cold", pytest.approx(2.326, abs=0.001))
    assert first_command_seconds([created]) is None
    assert first_command_seconds([ran]) is None
