"""
What a guest answers on execd's port costs the worker and the triggerer a stated bound, however
it answers: a compression bomb is read as the bytes that came, never inflated, and no further
than a cap; an answer dripped a byte a second ends by its call's deadline. execd's command ids
are checked before they reach a URL or a log line.

Memory is measured in a child process of its own (``tests/peak_memory.py``).
"""

from __future__ import annotations

import asyncio
import ssl
import textwrap
import time
from collections.abc import Iterator

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider._clients import CallTimedOut, execd_client
from opensandbox_provider.execd._background import BackgroundCommand
from opensandbox_provider.execd._command_id import checked, in_path
from opensandbox_provider.execd._deadline import Deadline
from tests.hostile_answers import handler, serve
from tests.peak_memory import run_child
from tests.unit.execd.test_execd_stream import loopback_execd
from tests.unit.execd_wire import COMMAND_ID

# The bomb inflates to 1 GiB; what the reader may add to the process is what a status or a
# ping is worth holding, with room for the allocator, and far below any fraction of the bomb.
MEMORY_BOUND = 32 * 1024 * 1024
# A status request's whole-call deadline in these tests, and the slack a loaded machine needs.
CALL_TIMEOUT = 2.0
SLACK = 3.0

STATUS_CHILD = textwrap.dedent(
    """
    import asyncio, ssl, sys
    from opensandbox_provider._clients import execd_client
    from opensandbox_provider.execd._background import BackgroundCommand
    from tests.peak_memory import peak_rss_delta, report

    async def status():
        client = execd_client(
            headers={}, verify=ssl.create_default_context(), timeout=30.0
        )
        async with client:
            command = BackgroundCommand(client, sys.argv[1], sys.argv[2], 30.0)
            try:
                return repr(await command.status())
            except Exception as e:
                return f"{type(e).__name__}: {e}"

    said, added = peak_rss_delta(lambda: asyncio.run(status()))
    report(said=said, added=added)
    """
)

PING_CHILD = textwrap.dedent(
    """
    import sys
    from tests.peak_memory import peak_rss_delta, report
    from tests.unit.execd.test_execd_stream import loopback_execd

    execd = loopback_execd(int(sys.argv[1]), request_timeout=30.0)
    answered, added = peak_rss_delta(lambda: execd.ping(within=10.0))
    report(answered=answered, added=added)
    """
)


def hostile(mode: str) -> Iterator[str]:
    server = serve(mode)
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def bomb() -> Iterator[str]:
    yield from hostile("bomb")


@pytest.fixture
def drip() -> Iterator[str]:
    yield from hostile("drip")


def test_a_status_answered_with_a_compression_bomb_is_refused_without_inflating_it(bomb) -> None:
    measured = run_child(STATUS_CHILD, f"http://{bomb}", COMMAND_ID, timeout=120)
    assert measured["said"].startswith("SandboxError: execd answered the status of command")
    assert measured["added"] < MEMORY_BOUND, measured


def test_a_ping_answered_with_a_compression_bomb_costs_the_worker_no_more_than_its_cap(
    bomb,
) -> None:
    measured = run_child(PING_CHILD, bomb.rsplit(":", 1)[1], timeout=120)
    assert measured["answered"] is True
    assert measured["added"] < MEMORY_BOUND, measured


FILES_CHILD = textwrap.dedent(
    """
    import sys
    from opensandbox_provider.execd._deadline import Deadline
    from tests.peak_memory import peak_rss_delta, report
    from tests.unit.execd.test_execd_stream import loopback_execd

    execd = loopback_execd(int(sys.argv[1]), request_timeout=30.0)
    def write():
        execd.upload("/tmp/f", b"content", deadline=Deadline.after(30.0))
        execd.create_working_directory("/work")
    _, added = peak_rss_delta(write)
    report(added=added)
    """
)


def test_an_upload_and_a_directory_answered_with_a_compression_bomb_cost_no_more_than_a_cap() -> (
    None
):
    class NoPaths(handler("bomb")):  # type: ignore[misc, valid-type]
        """Every path is missing, so the working directory is made; every POST is the bomb."""

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = serve("bomb", answers=NoPaths)
    try:
        measured = run_child(FILES_CHILD, str(server.server_address[1]), timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert measured["added"] < MEMORY_BOUND, measured
    print(f"upload and directory against the bomb: {measured['added'] / 2**20:.1f} MiB added")


def test_an_upload_dripped_a_byte_a_second_ends_by_its_deadline(drip) -> None:
    execd = loopback_execd(int(drip.rsplit(":", 1)[1]), request_timeout=30.0)
    started = time.monotonic()
    with pytest.raises(SandboxError, match=r"Could not write '/tmp/f'.*after the 2s allowed"):
        execd.upload("/tmp/f", b"content", deadline=Deadline.after(CALL_TIMEOUT))
    assert time.monotonic() - started < CALL_TIMEOUT + SLACK


def status_of(base_url: str, call_timeout: float) -> object:
    async def status() -> object:
        client = execd_client(headers={}, verify=ssl.create_default_context(), timeout=30.0)
        async with client:
            return await BackgroundCommand(client, base_url, COMMAND_ID, call_timeout).status()

    return asyncio.run(status())


def test_a_status_dripped_a_byte_a_second_ends_by_its_whole_call_deadline(drip) -> None:
    # Each byte comes well within the 30 s read timeout, so only a whole-call deadline ends it.
    started = time.monotonic()
    with pytest.raises(CallTimedOut, match=r"had not answered the status request within 2s"):
        status_of(f"http://{drip}", CALL_TIMEOUT)
    assert time.monotonic() - started < CALL_TIMEOUT + SLACK


def test_an_output_read_dripped_a_byte_a_second_ends_by_its_whole_call_deadline(drip) -> None:
    async def output() -> object:
        client = execd_client(headers={}, verify=ssl.create_default_context(), timeout=30.0)
        async with client:
            command = BackgroundCommand(client, f"http://{drip}", COMMAND_ID, CALL_TIMEOUT)
            return await command.output_file("/tmp/out", 0, limit=1024 * 1024)

    started = time.monotonic()
    with pytest.raises(CallTimedOut, match="the request for the command's output"):
        asyncio.run(output())
    assert time.monotonic() - started < CALL_TIMEOUT + SLACK


def test_a_refusal_is_quoted_on_one_line_and_no_further_than_its_cap() -> None:
    forged = b"denied\n[2026-01-01] INFO forged log line" + b"x" * 10 * 1024 * 1024

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, stream=httpx.ByteStream(forged))

    async def status() -> object:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            return await BackgroundCommand(client, "http://execd", COMMAND_ID, 5.0).status()

    with pytest.raises(SandboxError) as refused:
        asyncio.run(status())
    message = str(refused.value)
    assert "\n" not in message and "denied\\n[2026-01-01]" in message
    assert len(message) < 1024


def test_an_id_of_execds_form_is_taken_as_it_is() -> None:
    assert checked(COMMAND_ID, "sbx") == COMMAND_ID


@pytest.mark.parametrize(
    "command_id",
    ["../../sandboxes", "0F3C9A2E5B7D41C8A6E2F0B9D3C7A514", COMMAND_ID + "\nforged", "", "c"],
)
def test_an_id_of_any_other_form_is_a_clear_error(command_id: str) -> None:
    with pytest.raises(SandboxError, match="not an id execd gives") as refused:
        checked(command_id, "sbx")
    assert "\n" not in str(refused.value)


def test_an_id_goes_into_a_url_as_one_segment_whatever_it_holds() -> None:
    assert in_path("../../v1/sandboxes") == "..%2F..%2Fv1%2Fsandboxes"
