"""The test-only switch that stalls command streams on demand (OPENSANDBOX_TEST_STALL; see the
stand-in's header). Not an execd behaviour: it lets other suites produce a stalled stream."""

import httpx
import pytest

from tests.conformance.wire import ExecdWire
from tests.markers import NEEDS_STALL_SWITCH

pytestmark = NEEDS_STALL_SWITCH

# Longer than a heartbeat interval (3 s): a stream that stays silent this long has no heartbeat.
SILENCE_S = 4.5
# How long a heartbeat-stalled stream is watched.
WATCH_FRAMES = 4


def test_silent_stall_stops_the_stream_after_init(make_sandbox):
    sandbox = make_sandbox(env={"OPENSANDBOX_TEST_STALL": "silent"})

    with ExecdWire.of(sandbox) as wire:
        with wire.open_command({"command": "echo hi"}, read_timeout=SILENCE_S) as (
            response,
            frames,
        ):
            reader = iter(frames)
            assert response.headers["content-type"] == "text/event-stream"
            assert next(reader).type == "init"
            with pytest.raises(httpx.ReadTimeout):
                next(reader)


def test_heartbeat_stall_keeps_pinging_but_never_sends_output_or_an_end(make_sandbox):
    sandbox = make_sandbox(env={"OPENSANDBOX_TEST_STALL": "heartbeat"})

    with ExecdWire.of(sandbox) as wire:
        with wire.open_command({"command": "echo hi; exit 3"}) as (_response, frames):
            reader = iter(frames)
            seen = [next(reader).type for _ in range(WATCH_FRAMES)]

    assert seen == ["init", "ping", "ping", "ping"]


def test_a_stalled_command_still_runs_and_its_status_says_so(make_sandbox):
    sandbox = make_sandbox(env={"OPENSANDBOX_TEST_STALL": "silent"})

    with ExecdWire.of(sandbox) as wire:
        with wire.open_command({"command": "exit 5"}, read_timeout=SILENCE_S) as (_r, frames):
            command_id = next(iter(frames)).event["text"]
            with pytest.raises(httpx.ReadTimeout):
                next(iter(frames))
        status = sandbox.commands.get_command_status(command_id)

    assert (status.running, status.exit_code) == (False, 5)
