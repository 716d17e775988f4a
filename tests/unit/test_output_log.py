"""A command's output in the task log: whole lines, as they complete, bounded."""

from __future__ import annotations

import logging

import pytest

from opensandbox_provider._output_log import OutputLog

# How a line the command printed on stdout is marked in the task log.
OUT = "[sandbox stdout] "


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="output")
    return caplog


def output_log(**bounds: int) -> OutputLog:
    return OutputLog(logging.getLogger("output"), **bounds)


def test_a_line_is_logged_once_it_is_complete_however_it_was_split(logged) -> None:
    log = output_log()
    log.feed("stdout", b"hel")
    assert logged.messages == []
    log.feed("stdout", b"lo\nwor")
    assert logged.messages == [OUT + "hello"]
    log.feed("stdout", b"ld\n\n")
    assert logged.messages == [OUT + "hello", OUT + "world", OUT]


def test_stderr_is_marked_and_kept_apart_from_stdout(logged) -> None:
    log = output_log()
    log.feed("stdout", b"out-start ")
    log.feed("stderr", b"err\n")
    log.feed("stdout", b"out-end\n")
    assert logged.messages == ["[sandbox stderr] err", OUT + "out-start out-end"]


def test_a_last_line_without_a_newline_is_logged_at_the_close(logged) -> None:
    log = output_log()
    log.feed("output", b"done\nno newline")
    log.close()
    assert logged.messages == ["[sandbox output] done", "[sandbox output] no newline"]


def test_a_line_past_its_bound_is_cut_with_a_note_and_the_next_line_is_whole(logged) -> None:
    log = output_log(max_line=5)
    log.feed("stdout", b"abcdefgh")
    log.feed("stdout", b"ijk\nshort\n")
    assert logged.messages == [OUT + "abcde [line cut at 5 bytes]", OUT + "short"]


def test_past_the_total_bound_nothing_more_is_logged_and_a_note_says_so(logged) -> None:
    log = output_log(max_total=10)
    log.feed("stdout", b"12345\n67890\nmore\neven more\n")
    assert logged.messages[:2] == [OUT + "12345", OUT + "67890"]
    assert "output past 10 bytes is not logged" in logged.messages[2]
    log.feed("stdout", b"later\n")
    log.close()
    assert len(logged.messages) == 3 and log.full


def test_a_split_character_is_decoded_once_its_line_is_whole(logged) -> None:
    log = output_log()
    encoded = "é\n".encode()
    log.feed("stdout", encoded[:1])
    log.feed("stdout", encoded[1:])
    assert logged.messages == [OUT + "é"]


def test_a_guest_line_that_reads_like_the_providers_is_marked_as_the_commands(logged) -> None:
    log = output_log()
    log.feed("stdout", b"Destroyed sandbox x.\n")
    log.feed("stderr", b"Sandbox x: 'true' exited 0 in 0.01s\n")
    assert logged.messages == [
        "[sandbox stdout] Destroyed sandbox x.",
        "[sandbox stderr] Sandbox x: 'true' exited 0 in 0.01s",
    ]


def test_terminal_control_sequences_are_shown_not_obeyed(logged) -> None:
    log = output_log()
    log.feed("stdout", b"\x1b[2J\n")
    log.feed("stdout", b"a\rb\n")
    log.feed("stdout", "tab\tbell\x07del\x7fcsi\u009b31m\n".encode())
    assert logged.messages == [
        OUT + "\\x1b[2J",
        OUT + "a\\rb",
        OUT + "tab\tbell\\x07del\\x7fcsi\\x9b31m",
    ]
    assert not any(
        character in message
        for message in logged.messages
        for character in ("\x1b", "\r", "\x07", "\x7f", "\u009b")
    )


def test_a_cut_line_is_escaped_too_and_keeps_its_bound_in_the_guests_bytes(logged) -> None:
    # The bound counts the bytes the guest sent; what is kept of them is escaped afterwards.
    log = output_log(max_line=3)
    log.feed("stdout", b"\x1b\x1b\x1b\x1b\n")
    assert logged.messages == [OUT + "\\x1b\\x1b\\x1b [line cut at 3 bytes]"]
