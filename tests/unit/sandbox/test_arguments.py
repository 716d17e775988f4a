"""
A command's arguments are checked before anything else: a bad one fails the same way whatever
the sandbox's state, and before any request to the server or the sandbox, reconnecting
included. No stack is needed.
"""

from __future__ import annotations

import math

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.sandbox import OpenSandboxBackend

HANDLE = "sbx-arguments"


class Untouched(OpenSandboxBackend):
    """A backend that records every way toward a request instead of making one."""

    def __init__(self) -> None:
        super().__init__(None)
        self.reached: list[str] = []

    def _connection_config(self):  # type: ignore[no-untyped-def]
        self.reached.append("connection")
        raise AssertionError("the connection was read")

    def _sandbox(self, handle: str):  # type: ignore[no-untyped-def]
        self.reached.append(f"sandbox {handle}")
        raise AssertionError("the sandbox was reached")


BAD = [
    pytest.param("echo hi", 0, 1024, ValueError, "timeout", id="zero-timeout"),
    pytest.param("echo hi", -5, 1024, ValueError, "timeout", id="negative-timeout"),
    pytest.param("echo hi", math.nan, 1024, ValueError, "timeout", id="nan-timeout"),
    pytest.param("echo hi", math.inf, 1024, ValueError, "timeout", id="infinite-timeout"),
    pytest.param("", 10, 1024, SandboxError, "empty", id="empty-command"),
    pytest.param("  \n", 10, 1024, SandboxError, "empty", id="blank-command"),
    pytest.param("echo hi", 10, -1, ValueError, "max_output_bytes", id="negative-budget"),
]


@pytest.mark.parametrize(("command", "timeout", "budget", "error", "said"), BAD)
def test_a_bad_argument_fails_before_any_request(command, timeout, budget, error, said) -> None:
    backend = Untouched()
    with pytest.raises(error, match=said):
        backend.run_command(HANDLE, command, timeout=timeout, max_output_bytes=budget)
    assert backend.reached == []


@pytest.mark.parametrize(("command", "timeout", "budget", "error", "said"), BAD)
def test_a_bad_argument_fails_even_in_a_sandbox_destroyed_to_end_another_command(
    command, timeout, budget, error, said
) -> None:
    # A call on such a sandbox is told it was replaced; a call that could never have run is
    # told what is wrong with it instead.
    backend = Untouched()
    backend._abandoned.add(HANDLE)
    with pytest.raises(error, match=said):
        backend.run_command(HANDLE, command, timeout=timeout, max_output_bytes=budget)
    assert backend.reached == []


@pytest.mark.parametrize(
    ("command", "timeout", "error"),
    [("echo hi", 0, ValueError), ("   ", 10, SandboxError)],
)
def test_a_background_command_checks_its_arguments_before_any_request(
    command, timeout, error
) -> None:
    backend = Untouched()
    with pytest.raises(error):
        backend.start_command(HANDLE, command, timeout=timeout)
    assert backend.reached == []


def test_good_arguments_go_on_to_the_sandbox() -> None:
    # The double above is what the tests above rely on: with good arguments it is reached.
    backend = Untouched()
    with pytest.raises(AssertionError, match="the sandbox was reached"):
        backend.run_command(HANDLE, "echo hi", timeout=10, max_output_bytes=1024)
    assert backend.reached == [f"sandbox {HANDLE}"]
