"""A command's output in the task log: whole lines, as they complete, bounded."""

from __future__ import annotations

import logging

import pytest

from opensandbox_provider._output_log import OutputLog


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
    assert logged.messages == ["hello"]
    log.feed("stdout", b"ld\n\n")
    assert logged.messages == ["hello", "world", ""]


def test_stderr_is_marked_and_kept_apart_from_stdout(logged) -> None:
    log = output_log()
    log.feed("stdout", b"out-start ")
    log.feed("stderr", b"err\n")
    log.feed("stdout", b"out-end\n")
    assert logged.messages == ["[stderr] err", "out-start out-end"]


def test_a_last_line_without_a_newline_is_logged_at_the_close(logged) -> None:
    log = output_log()
    log.feed("output", b"done\nno newline")
    log.close()
    assert logged.messages == ["done", "no newline"]


def test_a_line_past_its_bound_is_cut_with_a_note_and_the_next_line_is_whole(logged) -> None:
    log = output_log(max_line=5)
    log.feed("stdout", b"abcdefgh")
    log.feed("stdout", b"ijk\nshort\n")
    assert logged.messages == ["abcde [line cut at 5 bytes]", "short"]


def test_past_the_total_bound_nothing_more_is_logged_and_a_note_says_so(logged) -> None:
    log = output_log(max_total=10)
    log.feed("stdout", b"12345\n67890\nmore\neven more\n")
    assert logged.messages[:2] == ["12345", "67890"]
    assert "output past 10 bytes is not logged" in logged.messages[2]
    log.feed("stdout", b"later\n")
    log.close()
    assert len(logged.messages) == 3 and log.full


def test_a_split_character_is_decoded_once_its_line_is_whole(logged) -> None:
    log = output_log()
    encoded = "é\n".encode()
    log.feed("stdout", encoded[:1])
    log.feed("stdout", encoded[1:])
    assert logged.messages == ["é"]
