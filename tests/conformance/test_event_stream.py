"""The /command event stream on the wire (docs/execd-wire.rst, wire-framing, wire-events,
wire-sequences, wire-ping, wire-grace).

These read the raw response, because the SDK hides the framing, the headers and the close.
"""

import json
import re

from tests.conformance.wire import ExecdWire

# execd sleeps 1 s after the terminal event; anything well short of it means it closed at once.
CLOSE_DELAY_FLOOR_S = 0.8
# A bound so a stream that never ends fails instead of hanging (no speed goal).
CLOSE_DELAY_BOUND_S = 10


def test_command_stream_is_a_200_text_event_stream(wire: ExecdWire):
    stream = wire.run({"command": "echo hi"})

    assert stream.response.status_code == 200
    assert stream.response.headers["content-type"] == "text/event-stream"
    assert stream.response.headers["cache-control"] == "no-cache"
    assert "content-length" not in stream.response.headers


def test_every_frame_is_compact_json_with_a_type_and_an_integer_timestamp(wire: ExecdWire):
    stream = wire.run({"command": "echo one; echo two >&2; exit 4"})

    assert stream.trailing == b""
    assert len(stream.frames) >= 5  # init, ping, stdout, stderr, error
    for frame in stream.frames:
        event = frame.event
        assert frame.raw == json.dumps(event, separators=(",", ":")).encode()
        assert not frame.raw.startswith(b"data:")
        assert isinstance(event["type"], str)
        assert isinstance(event["timestamp"], int) and not isinstance(event["timestamp"], bool)


def test_init_comes_first_and_carries_a_32_hex_command_id(wire: ExecdWire):
    stream = wire.run({"command": "echo hi"})

    init = stream.frames[0].event
    assert init["type"] == "init"
    assert re.fullmatch(r"[0-9a-f]{32}", init["text"])
    assert stream.types.count("init") == 1


def test_a_heartbeat_follows_init_and_repeats_every_three_seconds(wire: ExecdWire):
    stream = wire.run({"command": "sleep 7"})

    assert stream.types[:2] == ["init", "ping"]
    pings = stream.of_type("ping")
    assert all(ping["text"] == "pong" for ping in pings)
    assert len(pings) >= 3
    gaps = [
        later["timestamp"] - earlier["timestamp"]
        for earlier, later in zip(pings, pings[1:], strict=False)
    ]
    assert all(gap >= 2900 for gap in gaps), gaps


def test_terminal_event_is_last_and_connection_closes_about_a_second_later(wire: ExecdWire):
    stream = wire.run({"command": "echo done"})

    terminal = stream.terminal_frames
    assert [frame.type for frame in terminal] == ["execution_complete"]
    after = stream.frames[stream.frames.index(terminal[0]) + 1 :]
    assert all(frame.type == "ping" for frame in after)
    held_open_for = stream.ended_at - terminal[0].arrived_at
    assert CLOSE_DELAY_FLOOR_S <= held_open_for < CLOSE_DELAY_BOUND_S


def test_a_failing_command_ends_with_one_error_event_and_no_execution_complete(wire: ExecdWire):
    stream = wire.run({"command": "echo out; exit 9"})

    assert [frame.type for frame in stream.terminal_frames] == ["error"]
    assert stream.frames[-1].type in ("error", "ping")
    assert "execution_complete" not in stream.types
    last_output = max(i for i, kind in enumerate(stream.types) if kind in ("stdout", "stderr"))
    assert last_output < stream.types.index("error")


def test_execution_complete_carries_the_run_time_in_milliseconds(wire: ExecdWire):
    stream = wire.run({"command": "sleep 0.3"})

    (complete,) = stream.of_type("execution_complete")
    assert complete["execution_time"] >= 300


def test_validation_errors_are_json_before_any_event(wire: ExecdWire):
    response = wire.client.post("/command", json={"command": ""})

    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.json()["code"] == "INVALID_REQUEST_BODY"
    assert "'Command' failed on the 'required' tag" in response.json()["message"]


def test_a_byte_that_is_not_utf8_is_escaped_while_a_real_replacement_character_stays_raw(
    wire: ExecdWire,
):
    # Go's encoder writes the escape \ufffd for each invalid byte, and a U+FFFD the text really
    # holds as its raw UTF-8: the real execd showed it, the stand-in first wrote both raw.
    stream = wire.run({"command": "printf 'caf\\351\\377\\n'; printf 'x\\357\\277\\275y\\n'"})

    frames = [frame for frame in stream.frames if frame.type == "stdout"]
    assert [frame.event["text"] for frame in frames] == ["caf\ufffd\ufffd", "x\ufffdy"]
    assert b'"text":"caf\\ufffd\\ufffd"' in frames[0].raw
    assert b'"text":"x\xef\xbf\xbdy"' in frames[1].raw


def test_output_frames_are_gos_encoding_whatever_mix_of_lines_one_read_brings(wire: ExecdWire):
    # Plain lines and lines that need escaping, all in one read of the output file: each
    # frame must be exactly what Go's encoder writes for its line, in the lines' order.
    lines = ["plain", 'say "hi"', "back\\slash", "<b>&", "tab\there", "del\x7f", "é ✓", "x" * 99]
    script = "".join(line.replace("\\", "\\\\").replace("'", "'\\''") + "\\n" for line in lines)
    stream = wire.run({"command": f"for i in 1 2 3; do printf '{script}'; done"})

    frames = [frame for frame in stream.frames if frame.type == "stdout"]
    assert [frame.event["text"] for frame in frames] == lines * 3
    for frame in frames:
        go = json.dumps(frame.event, ensure_ascii=False, separators=(",", ":"))
        go = go.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        assert frame.raw == go.encode()
