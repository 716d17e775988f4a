"""The event-stream parser, fed execd's wire format (docs/execd-wire.rst, wire-framing, wire-events)
in every split."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from types import FrameType

import pytest

from opensandbox_provider.execd import _events
from opensandbox_provider.execd._events import MAX_WHOLE_FRAME, BoundedTail, EventParser
from tests.unit.execd_wire import complete, failed, frame


def parse(stream: bytes, *, split: int, max_bytes: int = 1024) -> EventParser:
    parser = EventParser(max_bytes)
    for start in range(0, len(stream), split):
        parser.feed(stream[start : start + split])
    parser.close()
    return parser


def random_splits(stream: bytes, seed: int, max_bytes: int) -> EventParser:
    rng = random.Random(seed)
    parser = EventParser(max_bytes)
    at = 0
    while at < len(stream):
        step = rng.choice([1, 2, 3, 5, 64, 1000, 65536, 300_000])
        parser.feed(stream[at : at + step])
        at += step
    parser.close()
    return parser


SPLITS = [1, 2, 3, 7, 64, 4096, 1 << 20]


@pytest.mark.parametrize("split", SPLITS)
def test_blank_lines_survive_the_event_stream(split: int) -> None:
    # printf 'A\n\nB\nC\n': execd sends each line without its terminator, a blank line as "\n".
    stream = (
        frame("init", "0f3c")
        + frame("ping", "pong")
        + frame("stdout", "A")
        + frame("stdout", "\n")
        + frame("stdout", "B")
        + frame("stdout", "C")
        + complete()
    )
    parser = parse(stream, split=split)
    assert parser.stdout.text() == "A\n\nB\nC\n"
    assert parser.ending is not None and parser.ending.exit_code == 0
    assert parser.command_id == "0f3c"


def test_an_unterminated_last_line_comes_back_with_a_newline() -> None:
    # printf 'A\n\nB\nC' sends the same events as with the final newline (execd flushes the
    # held-back line at exit, unmarked: docs/execd-wire.rst, wire-lines), so the common case, a
    # terminated line, is restored. The toolset splits on lines, so the model sees the same text
    # either way.
    stream = (
        frame("stdout", "A") + frame("stdout", "\n") + frame("stdout", "B") + frame("stdout", "C")
    )
    assert parse(stream + complete(), split=5).stdout.text() == "A\n\nB\nC\n"


def test_stdout_and_stderr_are_kept_apart() -> None:
    stream = frame("stdout", "out") + frame("stderr", "err") + frame("stdout", "more") + complete()
    parser = parse(stream, split=3)
    assert (parser.stdout.text(), parser.stderr.text()) == ("out\nmore\n", "err\n")
    assert not parser.stdout.truncated and not parser.stderr.truncated


@pytest.mark.parametrize("split", [1, 100, 65536])
def test_each_stream_keeps_its_tail_within_the_byte_budget(split: int) -> None:
    lines = [f"line {n}" for n in range(2000)]
    stream = (
        b"".join(frame("stdout", line) for line in lines) + frame("stderr", "short") + complete()
    )
    parser = parse(stream, split=split, max_bytes=100)
    expected = ("\n".join(lines) + "\n").encode()[-100:].decode()
    assert parser.stdout.text() == expected
    assert parser.stdout.truncated
    assert parser.stderr.text() == "short\n" and not parser.stderr.truncated


def test_output_that_fits_exactly_is_not_marked_truncated() -> None:
    parser = parse(frame("stdout", "x" * 9) + complete(), split=4, max_bytes=10)
    assert parser.stdout.text() == "x" * 9 + "\n"
    assert not parser.stdout.truncated


@pytest.mark.parametrize("split", [65536, 1 << 20, 77_777])
def test_a_line_longer_than_any_frame_is_read_as_it_streams(split: int) -> None:
    line = "x" * (3 * MAX_WHOLE_FRAME) + "END"
    stream = frame("init", "id") + frame("stdout", line) + frame("stdout", "after") + complete()
    parser = parse(stream, split=split, max_bytes=50)
    assert parser.stdout.text() == ("x" * 40 + "END\nafter\n")[-50:]
    assert parser.stdout.truncated
    assert parser.ending is not None and parser.ending.exit_code == 0


TRICKY_TEXT = '\x00\x01\t"\\<>&\u2028é€😀\\u0041\\\\\\"end'


@pytest.mark.parametrize("seed", range(6))
def test_escaped_text_decodes_the_same_however_a_long_frame_is_split(seed: int) -> None:
    # Go escapes control characters as \u00XX (six bytes for one), quotes, backslashes and
    # <>& (docs/execd-wire.rst, wire-framing); a cut anywhere in an escape or a UTF-8 character must
    # not change the tail.
    line = TRICKY_TEXT * 200_000
    parser = random_splits(frame("stderr", line) + complete(), seed, max_bytes=333)
    assert parser.stderr.text() == (line + "\n").encode()[-333:].decode("utf-8", errors="ignore")
    assert parser.stderr.truncated


def test_a_long_frame_of_backslashes_and_quotes_ends_where_its_text_ends() -> None:
    line = '\\"' * 2_000_000
    parser = parse(
        frame("stdout", line) + frame("stdout", "next") + complete(), split=65536, max_bytes=20
    )
    assert parser.stdout.text() == ('\\"' * 10 + "\nnext\n")[-20:]


def test_a_line_cut_while_it_streams_is_not_counted_as_if_it_arrived_whole() -> None:
    parser = parse(
        frame("stdout", "x" * (3 * MAX_WHOLE_FRAME)) + complete(), split=65536, max_bytes=10
    )
    assert parser.stdout.truncated and not parser.stdout.counted
    lines = parse(frame("stdout", "x" * 100) + complete(), split=7, max_bytes=10)
    assert lines.stdout.truncated and lines.stdout.counted and lines.stdout.total == 101


def test_a_long_frame_fits_the_budget_whole_when_it_is_short_enough() -> None:
    line = "y" * (MAX_WHOLE_FRAME + 10)
    parser = parse(frame("stdout", line) + complete(), split=8192, max_bytes=2 * MAX_WHOLE_FRAME)
    assert parser.stdout.text() == line + "\n"
    assert not parser.stdout.truncated


def test_output_after_the_terminal_event_is_ignored() -> None:
    parser = parse(complete() + frame("stdout", "late") + frame("ping", "pong"), split=10)
    assert parser.stdout.text() == ""
    assert parser.ending is not None and parser.ending.exit_code == 0


def test_an_exit_status_is_read_from_the_error_event() -> None:
    parser = parse(frame("stderr", "boom") + failed("3", "exit status 3"), split=9)
    assert parser.ending is not None
    assert parser.ending.exit_code == 3
    assert parser.ending.message == "exit status 3"


def test_a_signal_is_reported_as_minus_one_with_its_name() -> None:
    # kill -9 $$ and a deadline both end as evalue "-1", traceback "signal: killed"
    # (docs/execd-wire.rst, wire-exit).
    parser = parse(failed("-1", "signal: killed"), split=4)
    assert parser.ending is not None
    assert (parser.ending.exit_code, parser.ending.message) == (-1, "signal: killed")


def test_a_failure_without_a_numeric_status_has_no_exit_code() -> None:
    text = "fork/exec /usr/bin/bash: operation not permitted"
    parser = parse(failed(text, text), split=4)
    assert parser.ending is not None
    assert parser.ending.exit_code is None
    assert parser.ending.message == text


def test_a_stream_that_ends_without_a_terminal_event_has_no_ending() -> None:
    parser = parse(frame("init", "id") + frame("stdout", "partial"), split=6)
    assert parser.ending is None
    assert parser.stdout.text() == "partial\n"


def test_the_last_frame_counts_without_its_separator() -> None:
    parser = parse(frame("stdout", "a") + complete().rstrip(b"\n"), split=3)
    assert parser.ending is not None and parser.ending.exit_code == 0


def test_a_long_frame_cut_off_by_the_end_of_the_stream_keeps_what_arrived() -> None:
    line = "z" * (2 * MAX_WHOLE_FRAME)
    cut = frame("stdout", line)[: MAX_WHOLE_FRAME + 100]
    parser = parse(cut, split=65536, max_bytes=10)
    assert parser.stdout.text() == "z" * 10
    assert parser.ending is None


def test_sse_data_framing_is_read_as_well() -> None:
    # The SDK accepts standard SSE "data:" events as well as execd's bare JSON
    # (docs/execd-wire.rst, wire-framing).
    stream = b"".join(b"data: " + event for event in (frame("stdout", "hi"), complete()))
    parser = parse(stream, split=5)
    assert parser.stdout.text() == "hi\n"
    assert parser.ending is not None and parser.ending.exit_code == 0


def test_unreadable_frames_are_skipped() -> None:
    stream = b"not json\n\n" + frame("stdout", "ok") + b"[1,2]\n\n" + complete()
    parser = parse(stream, split=7)
    assert parser.stdout.text() == "ok\n"
    assert parser.ending is not None


def test_a_long_frame_that_is_not_output_is_skipped() -> None:
    junk = b'{"type":"result","results":{"text":"' + b"r" * (2 * MAX_WHOLE_FRAME) + b'"}}\n\n'
    parser = parse(junk + frame("stdout", "ok") + complete(), split=65536)
    assert parser.stdout.text() == "ok\n"


def test_a_bounded_tail_trims_to_its_budget() -> None:
    tail = BoundedTail(4)
    for piece in (b"ab", b"cd", b"ef"):
        tail.append(piece)
    assert tail.text() == "cdef" and tail.truncated and tail.total == 6


def test_a_bounded_tail_drops_a_character_its_cut_splits() -> None:
    tail = BoundedTail(3)
    tail.append("aé€".encode())  # 1 + 2 + 3 bytes; the last three are "€"
    assert tail.text() == "€"
    tail.append(b"x")
    assert tail.text() == "x"  # the cut falls inside "€", whose remains are dropped


def random_events(rng: random.Random) -> tuple[list[bytes], dict[str, bytes]]:
    """Frames of a command's stream, and the bytes each output stream should come back as."""
    texts = ["plain line", "x" * 99, "\n", 'say "hi"', "C:\\path", "<b>&", "é ✓", "\t", "pong"]
    frames = [frame("init", "0f3c")]
    expected = {"stdout": b"", "stderr": b""}
    for _ in range(rng.randint(0, 3000)):
        kind = rng.choice(["stdout", "stdout", "stdout", "stderr", "ping"])
        text = rng.choice(texts)
        frames.append(frame(kind, text))
        if kind != "ping":
            expected[kind] += (text if text == "\n" else text + "\n").encode()
    return frames, expected


@pytest.mark.parametrize("seed", range(30))
def test_any_mix_of_plain_and_escaped_frames_keeps_each_streams_exact_tail(seed: int) -> None:
    # Runs of plain frames take a faster path than frames with escapes or other events; the
    # result must not depend on which frames happened to arrive together.
    rng = random.Random(seed)
    frames, expected = random_events(rng)
    max_bytes = rng.choice([1, 100, 5000, 1 << 20])

    parser = random_splits(b"".join(frames) + complete(), seed, max_bytes=max_bytes)

    assert parser.command_id == "0f3c"
    assert parser.ending is not None and parser.ending.exit_code == 0
    for tail, want in ((parser.stdout, expected["stdout"]), (parser.stderr, expected["stderr"])):
        assert tail.total == len(want)
        assert tail.truncated == (len(want) > max_bytes)
        assert tail.text() == want[-max_bytes:].decode("utf-8", errors="ignore")


def test_a_plain_looking_frame_with_more_fields_is_still_read() -> None:
    # A later execd may add fields; such a frame is not plain and goes through the JSON parser.
    stream = frame("stdout", "one") + frame("stdout", "two", extra=1) + frame("stdout", "three")
    parser = parse(stream + complete(), split=1 << 20)
    assert parser.stdout.text() == "one\ntwo\nthree\n"


@pytest.mark.parametrize("split", [1, 7, 65536])
def test_output_is_handed_on_as_it_is_parsed_before_it_is_bounded(split: int) -> None:
    seen: list[tuple[str, bytes]] = []
    parser = EventParser(4, on_output=lambda stream, data: seen.append((stream, data)))
    stream = frame("stdout", "first line") + frame("stderr", "oops") + frame("stdout", "second")
    for start in range(0, len(stream), split):
        parser.feed(stream[start : start + split])
    assert b"".join(data for kind, data in seen if kind == "stdout") == b"first line\nsecond\n"
    assert b"".join(data for kind, data in seen if kind == "stderr") == b"oops\n"
    # Nothing had ended yet: each line was handed on as soon as its frame was complete.
    assert parser.ending is None and parser.stdout.text() == "ond\n"


# Escapes a JSON encoder may write, including those Go's never does (``\/``, upper-case hex) and
# surrogates alone, which JSON allows and which decode to no character UTF-8 can hold.
_ESCAPED_PIECES = [
    '\\"',
    "\\\\",
    "\\/",
    "\\b",
    "\\f",
    "\\n",
    "\\r",
    "\\t",
    "\\u0000",
    "\\u001f",
    "\\u00e9",
    "\\u00E9",
    "\\u2028",
    "\\ud83d\\ude00",
    "\\uD83D\\uDE00",
    "\\ud800",
    "\\udc00",
    "\\udbff",
    "\\ud83d\\u0041",
    '\\\\\\\\\\"',
    "\\\\u0041",
    "x",
    "{",
    ":",
    ",",
    "é",
    "€",
    "😀",
    "\x7f",
]


def tricky_json_text(rng: random.Random, pieces: int) -> str:
    """The JSON text, between the quotes, of a string made of escapes and characters at random."""
    return "".join(rng.choice(_ESCAPED_PIECES) for _ in range(pieces))


def as_json_reads_it(texts: list[str], max_bytes: int) -> str:
    """What the tail of a stream of these JSON texts must be, decoded by ``json.loads``."""
    lines = [json.loads(f'"{text}"') for text in texts]
    joined = "".join(line if line == "\n" else line + "\n" for line in lines)
    return joined.encode("utf-8", "replace")[-max_bytes:].decode("utf-8", errors="ignore")


def raw_frame(kind: str, json_text: str) -> bytes:
    return f'{{"type":"{kind}","text":"{json_text}","timestamp":1}}\n\n'.encode()


@pytest.mark.parametrize("seed", range(12))
def test_escaped_text_is_read_exactly_as_json_reads_it(seed: int) -> None:
    # Long frames are scanned and decoded in pieces, short ones whole; either way a tail must be
    # what json.loads makes of the same text, however the stream is split.
    rng = random.Random(seed)
    max_bytes = rng.choice([1, 7, 333, 4096, 3 * MAX_WHOLE_FRAME])
    texts = [
        tricky_json_text(rng, rng.choice([1, 5, 200, 300_000])) for _ in range(rng.randint(1, 4))
    ]
    stream = b"".join(raw_frame("stdout", text) for text in texts) + complete()

    parser = random_splits(stream, seed, max_bytes=max_bytes)

    assert parser.ending is not None and parser.ending.exit_code == 0
    assert parser.stdout.text() == as_json_reads_it(texts, max_bytes)


@pytest.mark.parametrize("run", range(1, 8))
def test_a_run_of_backslashes_ends_the_text_where_json_says(run: int) -> None:
    # The closing quote is the first one after an even run of backslashes, wherever a read cuts.
    text = "a" * (MAX_WHOLE_FRAME + 5) + "\\" * (2 * run) + '\\"' * run + "\\" * (2 * run)
    stream = raw_frame("stdout", text) + raw_frame("stdout", "next") + complete()
    for split in (1 << 16, 4093, 1 << 20):
        parser = parse(stream, split=split, max_bytes=64)
        assert parser.stdout.text() == as_json_reads_it([text, "next"], 64)


def python_steps_in_the_parser(feed: Callable[[], None]) -> int:
    """How many lines of the parser's own Python ``feed`` runs: its work that is not at C speed."""
    steps = 0
    parser_module = _events.__file__

    def local(frame: FrameType, event: str, arg: object) -> Callable | None:
        nonlocal steps
        steps += event == "line"
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Callable | None:
        return local if frame.f_code.co_filename == parser_module else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        feed()
    finally:
        sys.settrace(previous)
    return steps


def test_a_line_of_minified_json_costs_python_steps_per_read_not_per_escape() -> None:
    # A command that prints minified JSON on one line sends a quote escaped every few bytes; a
    # scan that looks at each escape in Python reads that at a few MB/s, a minute of worker CPU
    # for 400 MB. Counting steps rather than timing them keeps the test exact on a busy machine.
    record = json.dumps({"id": 7, "name": 'a"b', "tags": ["x", "y"], "ok": True})
    line = record * (8 * MAX_WHOLE_FRAME // len(record))
    stream = frame("stdout", line) + complete()
    read = 256 * 1024
    parser = EventParser(50 * 1024)

    def feed() -> None:
        for start in range(0, len(stream), read):
            parser.feed(stream[start : start + read])

    steps = python_steps_in_the_parser(feed)

    assert parser.ending is not None
    assert parser.stdout.text() == (line + "\n")[-50 * 1024 :]
    reads = -(-len(stream) // read)
    assert steps < 100 * reads, f"{steps} Python steps for {reads} reads"


def test_an_exit_status_too_long_to_be_one_is_no_status() -> None:
    # Python refuses to convert thousands of digits; no exit status has more than a Go int's.
    parser = parse(frame("stdout", "a") + failed("9" * 5000), split=4096)
    assert parser.ending is not None and parser.ending.exit_code is None
    assert len(parser.ending.message) <= 4096


def test_a_frame_nested_deeper_than_python_parses_is_unreadable_not_fatal() -> None:
    nested = b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    in_an_event = b'{"type":"stdout","text":"c","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n\n"
    stream = frame("stdout", "a") + nested + frame("stdout", "b") + in_an_event + complete()
    for split in (7, 4096, 1 << 20):
        parser = parse(stream, split=split)
        assert parser.stdout.text() == "a\nb\n"
        assert parser.ending is not None and parser.ending.exit_code == 0
