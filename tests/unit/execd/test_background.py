"""Reading a background command's status and output, async (docs/execd-wire.rst, wire-status,
wire-logs, wire-range), against answers shaped as execd gives them, and the redirection that
keeps its streams apart."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.execd._background import BackgroundCommand, output_paths, separated
from tests.unit.as_sent import as_sent

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
    if path == "/files/download":
        return ranged(request)
    if path == "/command/done/logs":
        cursor = int(request.url.params.get("cursor", "0"))
        headers = {"EXECD-COMMANDS-TAIL-CURSOR": str(len(OUTPUT))}
        # A stream, as a real transport's body is, not content read already.
        return httpx.Response(200, stream=httpx.ByteStream(OUTPUT[cursor:]), headers=headers)
    return httpx.Response(400, json={"code": "INVALID_REQUEST_BODY", "message": "no such id"})


def ranged(request: httpx.Request) -> httpx.Response:
    """A download as execd answers one with a Range header (docs/execd-wire.rst, wire-range)."""
    name = request.url.params["path"]
    if name == "/missing":
        return httpx.Response(404, json={"code": "FILE_NOT_FOUND"})
    if name == "/broken":
        return httpx.Response(500, json={"code": "RUNTIME_ERROR", "message": "permission denied"})
    content = b"" if name == "/empty" else OUTPUT
    first, last = (int(n) for n in request.headers["Range"].removeprefix("bytes=").split("-"))
    if name == "/whole" or not content:
        # An empty file, or a server that ignores the range: the whole file, as a 200.
        return httpx.Response(200, stream=httpx.ByteStream(content))
    if first >= len(content):
        headers = {"Content-Range": f"bytes */{len(content)}"}
        return httpx.Response(416, stream=httpx.ByteStream(b"invalid range"), headers=headers)
    last = min(last, len(content) - 1)
    headers = {"Content-Range": f"bytes {first}-{last}/{len(content)}"}
    return httpx.Response(206, stream=httpx.ByteStream(content[first : last + 1]), headers=headers)


def call(command_id: str, method: str, *args, **kwargs):
    async def go():
        async with httpx.AsyncClient(transport=as_sent(answer)) as client:
            command = BackgroundCommand(client, "http://execd/", command_id, 5.0)
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


def test_a_file_is_read_by_range_from_the_cursor_with_its_size() -> None:
    piece = call("done", "output_file", "/out", 7, limit=6)
    assert (piece.data, piece.cursor, piece.end) == (b"line 2", 13, len(OUTPUT))


def test_a_cursor_at_the_end_of_a_file_reads_nothing_and_learns_its_size() -> None:
    piece = call("done", "output_file", "/out", len(OUTPUT), limit=6)
    assert (piece.data, piece.cursor, piece.end) == (b"", len(OUTPUT), len(OUTPUT))


def test_an_empty_or_missing_file_has_nothing_yet() -> None:
    assert call("done", "output_file", "/empty", 0, limit=6).data == b""
    piece = call("done", "output_file", "/missing", 5, limit=6)
    assert (piece.data, piece.cursor, piece.end) == (b"", 5, 5)


def test_a_whole_file_answered_to_a_range_is_cut_to_the_range() -> None:
    piece = call("done", "output_file", "/whole", 7, limit=6)
    assert (piece.data, piece.cursor) == (b"line 2", 13)


def test_a_refused_read_of_a_file_is_a_sandbox_error_with_execds_answer() -> None:
    with pytest.raises(SandboxError, match="HTTP 500.*permission denied"):
        call("done", "output_file", "/broken", 0, limit=6)


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_a_separated_command_writes_each_stream_to_its_own_file(tmp_path, shell) -> None:
    if shutil.which(shell) is None:
        pytest.fail(f"{shell} is not on PATH; execd runs commands with it.")
    paths = {name: str(tmp_path / name) for name in ("stdout", "stderr")}
    script = separated("echo out; echo err >&2; no-such-command-here; echo 'it''s'; exit 3", paths)
    # As execd starts a command (docs/execd-wire.rst, wire-launch).
    ran = subprocess.run([shell, "-c", script], capture_output=True, stdin=subprocess.DEVNULL)
    assert (ran.returncode, ran.stdout, ran.stderr) == (3, b"", b"")
    assert (tmp_path / "stdout").read_bytes() == b"out\nits\n"
    stderr = (tmp_path / "stderr").read_bytes()
    assert stderr.startswith(b"err\n") and b"no-such-command-here" in stderr


def test_each_command_gets_files_of_its_own() -> None:
    first, second = output_paths(), output_paths()
    assert first["stdout"] != second["stdout"] and first["stderr"] != second["stderr"]
    assert all(path.startswith("/tmp/") for path in (*first.values(), *second.values()))
