"""Reading a background command's status and output, async (docs/execd-wire.rst, wire-status,
wire-logs), against answers shaped as execd gives them."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.sandbox._background import BackgroundCommand

OUTPUT = b"line 1\nline 2\nline 3\n"


def answer(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path == "/command/status/running":
        return httpx.Response(200, json={"id": "running", "running": True, "started_at": "x"})
    if path == "/command/status/done":
        body = {
            "id": "done",
            "running": False,
            "exit_code": 3,
            "error": "exit status 3",
            "started_at": "2026-12-01T10:00:00.5+00:00",
            "finished_at": "2026-12-01T10:00:02+00:00",
        }
        return httpx.Response(200, content=json.dumps(body))
    if path == "/command/status/quiet":
        # An exit code of 0 left out as empty, as Go's encoder may.
        body = {"id": "quiet", "running": False, "finished_at": "2026-12-01T10:00:02+00:00"}
        return httpx.Response(200, json=body)
    if path == "/command/status/unknown":
        return httpx.Response(404, json={"code": "INVALID_REQUEST_BODY"})
    if path == "/command/done/logs":
        cursor = int(request.url.params.get("cursor", "0"))
        headers = {"EXECD-COMMANDS-TAIL-CURSOR": str(len(OUTPUT))}
        # A stream, as a real transport's body is, not content read already.
        return httpx.Response(200, stream=httpx.ByteStream(OUTPUT[cursor:]), headers=headers)
    return httpx.Response(400, json={"code": "INVALID_REQUEST_BODY", "message": "no such id"})


def call(command_id: str, method: str, *args, **kwargs):
    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            command = BackgroundCommand(client, "http://execd/", command_id)
            return await getattr(command, method)(*args, **kwargs)

    return asyncio.run(go())


def test_a_running_command_has_no_exit_code_and_has_not_ended() -> None:
    status = call("running", "status")
    assert (status.running, status.exit_code, status.ended) == (True, None, False)


def test_an_ended_command_says_its_exit_code_error_and_duration() -> None:
    status = call("done", "status")
    assert (status.ended, status.exit_code, status.error) == (True, 3, "exit status 3")
    assert status.duration == 1.5


def test_an_ended_command_whose_exit_code_was_left_out_exited_0() -> None:
    status = call("quiet", "status")
    assert (status.ended, status.exit_code, status.exit_status) == (True, None, 0)


def test_a_command_execd_has_no_record_of_is_none_for_the_caller_to_judge() -> None:
    assert call("unknown", "status") is None


def test_output_is_read_from_the_cursor_and_the_cursor_moves_past_it() -> None:
    piece = call("done", "output", 7, limit=1024)
    assert (piece.data, piece.cursor, piece.end) == (b"line 2\nline 3\n", len(OUTPUT), len(OUTPUT))


def test_one_read_of_output_takes_no_more_than_its_limit() -> None:
    piece = call("done", "output", 0, limit=5)
    assert (piece.data, piece.cursor, piece.end) == (b"line ", 5, len(OUTPUT))


def test_a_refused_read_of_output_is_a_sandbox_error_with_execds_answer() -> None:
    with pytest.raises(SandboxError, match="HTTP 400.*no such id"):
        call("other", "output", 0, limit=5)
