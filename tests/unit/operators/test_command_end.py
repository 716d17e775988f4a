"""How a command ended, as the trigger's event carries it: read the same from every release."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxExecResult

from opensandbox_provider.operators._command_end import (
    CommandEnd,
    CommandEvent,
    CommandLost,
    OutOfTime,
    foreground_end,
)

# Events as an earlier release's trigger fired them, literal, so that a change to the type
# that a worker of this release could not read from an older triggerer fails here.
EARLIER_EVENTS: list[tuple[dict[str, Any], CommandEvent]] = [
    (
        {
            "status": "ended",
            "sandbox": "sbx",
            "exit_code": 3,
            "stdout": "out\n",
            "stderr": "bad\n",
            "timed_out": False,
        },
        CommandEvent(
            "sbx", CommandEnd(exit_code=3, stdout="out\n", stderr="bad\n", timed_out=False)
        ),
    ),
    (
        {
            "status": "ended",
            "sandbox": "sbx",
            "exit_code": 143,
            "stdout": "",
            "stderr": "",
            "timed_out": False,
            "stopped": "stopped by SIGTERM",
        },
        CommandEvent(
            "sbx",
            CommandEnd(
                exit_code=143, stdout="", stderr="", timed_out=False, stopped="stopped by SIGTERM"
            ),
        ),
    ),
    (
        {"status": "timeout", "sandbox": "sbx", "message": "out of execution_timeout"},
        CommandEvent("sbx", OutOfTime("out of execution_timeout")),
    ),
    (
        {"status": "error", "sandbox": "sbx", "message": "execd lost the command"},
        CommandEvent("sbx", CommandLost("execd lost the command")),
    ),
]


@pytest.mark.parametrize(
    ("fired", "read"), EARLIER_EVENTS, ids=["ended", "stopped", "timeout", "error"]
)
def test_an_earlier_releases_event_is_read_and_fired_back_unchanged(
    fired: dict[str, Any], read: CommandEvent
) -> None:
    assert CommandEvent.of(fired) == read
    # A triggerer of this release fires what a worker of the earlier one reads.
    assert read.payload() == fired


def test_a_stop_that_found_the_command_ended_is_not_in_the_event() -> None:
    # The trigger remembers such a stop as "", and an earlier release fired no key for it.
    end = CommandEnd(exit_code=0, stdout="", stderr="", timed_out=False, stopped="")
    assert "stopped" not in CommandEvent("sbx", end).payload()


def test_an_event_of_a_status_no_release_fires_says_which_it_knows() -> None:
    with pytest.raises(ValueError, match="status 'success'.*'ended', 'timeout', 'error'"):
        CommandEvent.of({"status": "success", "sandbox": "sbx"})


def test_a_foreground_command_whose_sandbox_ended_under_it_is_lost() -> None:
    result = SandboxExecResult(
        exit_code=-1,
        stdout="",
        stderr="The command was abandoned: it stalled. The sandbox was destroyed.\n",
        sandbox_terminated=True,
    )
    assert foreground_end(result, stopped=None) == CommandLost(
        "The command was abandoned: it stalled. The sandbox was destroyed."
    )


def test_a_foreground_command_that_ended_keeps_its_tails_and_how_it_was_stopped() -> None:
    result = SandboxExecResult(exit_code=0, stdout="done\n", stderr="", timed_out=False)
    end = foreground_end(result, stopped="stopped by SIGTERM")
    assert end == CommandEnd(
        exit_code=0, stdout="done\n", stderr="", timed_out=False, stopped="stopped by SIGTERM"
    )
    assert isinstance(end, CommandEnd)
    assert end.xcom() == {"exit_code": 0, "stdout": "done\n"}
