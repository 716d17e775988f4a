"""What a command's result says, from the way its event stream ended, and its line in the task log.

execd reports an end only in the terminal event, and a signal, the deadline's included, only as
-1 (docs/execd-wire.rst, wire-exit, wire-timeout), so these pin what the backend makes of each.
"""

from __future__ import annotations

import pytest

from opensandbox_provider.execd._events import Ending, EventParser
from opensandbox_provider.execd._stream_end import (
    Abandoned,
    BrokeEndRecovered,
    BrokeEndUnknown,
    EndedByItself,
)
from opensandbox_provider.sandbox._outcome import (
    StreamedCommand,
    command_result,
    killed_at_deadline,
    log_line,
)
from tests.unit.execd_wire import complete, failed, frame

NOT_STARTED = 'exec: "bash": executable file not found in $PATH'
BUDGET = 5.0


def streamed(*frames: bytes, abandoned: str | None = None, max_bytes: int = 1024):
    parser = EventParser(max_bytes)
    parser.feed(frame("init", "cmd-1") + frame("stdout", "out") + frame("stderr", "err"))
    for event in frames:
        parser.feed(event)
    if abandoned is None:
        parser.close()
        return StreamedCommand(parser, EndedByItself())
    return StreamedCommand(parser, Abandoned(abandoned))


def result_of(command: StreamedCommand, *, elapsed: float = 0.5, applied: float = BUDGET):
    return command_result(command, elapsed=elapsed, applied=applied, requested=BUDGET)


def test_a_command_that_completes_exits_0_with_its_own_output_only() -> None:
    result = result_of(streamed(complete()))
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (0, False, False)
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert result.applied_timeout is None


@pytest.mark.parametrize("elapsed", [0.5, BUDGET + 1])
def test_an_exit_status_is_the_exit_code_and_never_a_timeout(elapsed: float) -> None:
    result = result_of(streamed(failed("3", "exit status 3")), elapsed=elapsed)
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (3, False, False)
    # The exit code says all execd's "exit status 3" would, so nothing is added.
    assert result.stderr == "err\n"


def test_a_kill_once_the_deadline_has_passed_is_a_timeout_and_names_the_signal() -> None:
    result = result_of(streamed(failed("-1", "signal: killed")), elapsed=BUDGET)
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (-1, True, False)
    assert result.stderr == "err\nsignal: killed\n"


def test_a_kill_that_execds_clock_puts_a_little_before_the_deadline_is_still_a_timeout() -> None:
    # execd starts the deadline's clock before the process: the time it gives can fall short.
    result = result_of(streamed(failed("-1", "signal: killed")), elapsed=BUDGET - 0.3)
    assert (result.exit_code, result.timed_out) == (-1, True)


def test_a_sigkill_well_before_the_deadline_is_not_a_timeout() -> None:
    result = result_of(streamed(failed("-1", "signal: killed")), elapsed=BUDGET - 2)
    assert (result.exit_code, result.timed_out) == (-1, False)


def test_a_signal_other_than_sigkill_is_never_the_deadlines() -> None:
    result = result_of(streamed(failed("-1", "signal: terminated")), elapsed=BUDGET + 1)
    assert (result.exit_code, result.timed_out) == (-1, False)


@pytest.mark.parametrize(
    ("exit_code", "how", "ran_for", "expected"),
    [
        (-1, "signal: killed", BUDGET - 0.3, True),
        (-1, "", BUDGET - 0.3, True),
        (-1, "signal: killed", BUDGET - 1.5, False),
        (-1, "signal: interrupt", BUDGET, False),
        (137, "", BUDGET, False),
    ],
)
def test_a_status_says_a_deadline_kill_by_the_clock_with_a_tolerance_and_the_signal(
    exit_code: int, how: str, ran_for: float, expected: bool
) -> None:
    # What the trigger reads: execd's own started_at and finished_at, and Go's words.
    assert killed_at_deadline(exit_code, how, ran_for, BUDGET) is expected


def test_a_signal_before_the_deadline_is_not_a_timeout_and_names_the_signal() -> None:
    result = result_of(streamed(failed("-1", "signal: terminated")), elapsed=BUDGET - 0.1)
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (-1, False, False)
    assert result.stderr == "err\nsignal: terminated\n"


@pytest.mark.parametrize("elapsed", [0.5, BUDGET + 1])
def test_a_command_that_never_started_says_why_and_is_not_a_timeout(elapsed: float) -> None:
    result = result_of(streamed(failed(NOT_STARTED, NOT_STARTED)), elapsed=elapsed)
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (-1, False, False)
    assert result.stderr == f"err\n{NOT_STARTED}\n"


def test_an_error_event_without_its_error_ends_the_command_with_nothing_to_add() -> None:
    result = result_of(streamed(frame("error")))
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (-1, False, False)
    assert result.stderr == "err\n"


def test_a_stream_that_ends_without_a_terminal_event_says_so_in_stderr() -> None:
    result = result_of(streamed(frame("stdout", "more")), elapsed=BUDGET + 1)
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (-1, False, False)
    assert result.stdout == "out\nmore\n"
    assert result.stderr == (
        "err\nThe sandbox ended the command's output without saying how it ended.\n"
    )


@pytest.mark.parametrize(
    "why",
    [
        "the sandbox sent nothing for 10s, not even execd's heartbeat",
        "the command's stream was still open 30s past its 5s budget",
    ],
)
def test_an_abandoned_stream_is_a_timeout_whose_sandbox_was_destroyed(why: str) -> None:
    result = result_of(streamed(frame("stdout", "late"), abandoned=why), elapsed=1.0)
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (-1, True, True)
    assert result.stdout == "out\nlate\n"
    assert result.stderr == f"err\nThe command was abandoned: {why}. The sandbox was destroyed.\n"


def test_a_deadline_shortened_to_fit_the_sandbox_is_reported_and_a_kept_one_is_not() -> None:
    shortened = result_of(streamed(failed("-1", "signal: killed")), elapsed=2.0, applied=2.0)
    assert (shortened.timed_out, shortened.applied_timeout) == (True, 2.0)
    assert result_of(streamed(complete())).applied_timeout is None


def test_the_notes_count_against_the_stderr_budget_like_the_commands_own_output() -> None:
    result = result_of(streamed(abandoned="it stalled", max_bytes=16))
    note = "The command was abandoned: it stalled. The sandbox was destroyed.\n"
    assert result.stderr_truncated
    assert result.stderr == note[-16:]
    assert not result.stdout_truncated


def test_the_log_line_quotes_the_command_and_says_how_it_ended() -> None:
    command = streamed(complete())
    result = result_of(command)
    line = log_line("echo out", command, result, elapsed=0.123, applied=BUDGET)
    assert line == "'echo out' exited 0 in 0.12s (stdout 4 bytes; stderr 4 bytes)"


def test_the_log_line_gives_the_deadline_a_command_timed_out_after() -> None:
    command = streamed(failed("-1", "signal: killed"))
    result = result_of(command, elapsed=2.0, applied=2.0)
    line = log_line("sleep 9", command, result, elapsed=2.0, applied=2.0)
    assert line.startswith("'sleep 9' timed out after 2s in 2.00s (stdout 4 bytes; stderr")


def test_the_log_line_shortens_a_long_command_to_120_characters() -> None:
    command = streamed(complete())
    long = "echo " + "x" * 200
    line = log_line(long, command, result_of(command), elapsed=0.0, applied=BUDGET)
    quoted = line.split(" exited ")[0]
    assert quoted == repr(long[:117] + "...")


def test_the_log_line_hides_a_credential_in_a_url_of_the_command() -> None:
    command = streamed(complete())
    pip = "pip install -i https://deploy:index-secret@pypi.example/simple x"
    line = log_line(pip, command, result_of(command), elapsed=0.0, applied=BUDGET)
    assert "index-secret" not in line and "https://deploy:***@pypi.example" in line


def test_the_log_line_says_how_much_of_a_truncated_stream_was_kept() -> None:
    command = streamed(frame("stdout", "x" * 40), complete(), max_bytes=16)
    command.parser.stderr.mark_dropped()
    line = log_line("cat big", command, result_of(command), elapsed=0.0, applied=BUDGET)
    assert line.endswith(
        "(stdout 45 bytes, the last 16 kept; stderr over 16 bytes, the last 16 kept)"
    )


def test_a_command_recovered_after_its_stream_broke_keeps_its_code_and_says_output_may_be_missing():
    parser = EventParser(1024)
    parser.feed(frame("init", "id") + frame("stdout", "before"))
    parser.ending = Ending(exit_code=4)
    result = result_of(StreamedCommand(parser, BrokeEndRecovered("the connection broke (x)")))
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (4, False, False)
    assert result.stdout == "before\n"
    assert "broke while the command ran (the connection broke (x))" in result.stderr
    assert "output written after the break may be missing" in result.stderr


def test_a_command_whose_end_could_not_be_learned_after_a_break_says_why() -> None:
    parser = EventParser(1024)
    parser.feed(frame("init", "id"))
    result = result_of(StreamedCommand(parser, BrokeEndUnknown("the stream ended early")))
    assert (result.exit_code, result.sandbox_terminated) == (-1, False)
    assert "The command's output stopped: the stream ended early." in result.stderr
