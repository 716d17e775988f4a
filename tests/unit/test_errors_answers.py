"""
An error answer to a request the provider makes itself, and httpx's failures, each meet the
one table of ``_errors``: what the model is told, and whether the task fails.

A server or a guest cannot be made to answer each of these on demand, so the answers are
built here as they would arrive, bounded as the provider reads them.
"""

from __future__ import annotations

import json

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxTerminalError

from opensandbox_provider._errors import ErrorAnswer, status_of, to_sandbox_error

REQUEST = httpx.Request("GET", "http://sandbox.test/files/info")


def answer(status: int, body: bytes | str | object) -> ErrorAnswer:
    if isinstance(body, str):
        body = body.encode()
    elif not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return ErrorAnswer(httpx.Response(status, content=body, request=REQUEST), "Get file info")


# (status, body, the server's code as read, what the model is told, whether it is terminal)
ANSWERS = {
    "json code and message": (
        400,
        {"code": "INVALID_PATH", "message": "bad path"},
        "INVALID_PATH",
        "Could not read 'f': bad path [HTTP 400 INVALID_PATH].",
        False,
    ),
    "fastapi detail": (
        404,
        {"detail": {"code": "FILE_NOT_FOUND", "message": "no file"}},
        "FILE_NOT_FOUND",
        "Could not read 'f': no file [HTTP 404 FILE_NOT_FOUND].",
        True,
    ),
    "code without message": (
        409,
        {"code": "CONFLICT"},
        "CONFLICT",
        "Could not read 'f': Get file info failed: HTTP 409 [HTTP 409 CONFLICT].",
        False,
    ),
    "json without code": (
        422,
        {"detail": "Not Found"},
        None,
        'Could not read \'f\': Get file info failed: HTTP 422: {"detail": "Not Found"} [HTTP 422].',
        False,
    ),
    "plain text from a proxy": (
        502,
        "upstream connect error\n",
        None,
        "Could not read 'f': Get file info failed: HTTP 502: upstream connect error [HTTP 502].",
        True,
    ),
    "empty": (
        503,
        b"",
        None,
        "Could not read 'f': Get file info failed: HTTP 503 [HTTP 503].",
        True,
    ),
    "not utf-8": (
        500,
        b"\xff oops",
        None,
        "Could not read 'f': Get file info failed: HTTP 500: \ufffd oops [HTTP 500].",
        False,
    ),
    "a line-ending control character": (
        500,
        "one\rtwo",
        None,
        "Could not read 'f': Get file info failed: HTTP 500: one\\rtwo [HTTP 500].",
        False,
    ),
    "rate limited": (
        429,
        {"code": "RATE_LIMIT", "message": "slow down"},
        "RATE_LIMIT",
        "Could not read 'f': slow down [HTTP 429 RATE_LIMIT].",
        True,
    ),
    "a refused api key": (
        401,
        {"code": "INVALID_API_KEY", "message": "no"},
        "INVALID_API_KEY",
        "Could not read 'f': the OpenSandbox server refused the API key (no [HTTP 401 "
        "INVALID_API_KEY]). Set the connection's password to the api_key the server is "
        "configured with.",
        True,
    ),
}


@pytest.mark.parametrize(
    ("status", "body", "code", "told", "terminal"), ANSWERS.values(), ids=ANSWERS.keys()
)
def test_an_error_answer_is_told_with_the_servers_words_status_and_code(
    status: int, body: object, code: str | None, told: str, terminal: bool
) -> None:
    error = answer(status, body)
    assert (status_of(error), error.code) == (status, code)
    translated = to_sandbox_error(error, "read 'f'")
    assert str(translated) == told
    assert type(translated) is (SandboxTerminalError if terminal else SandboxError)


@pytest.mark.parametrize(
    "body", ["x" * 5000, "[" * 100_000, "1" * 5000], ids=["long", "nested too deep", "long number"]
)
def test_an_answer_that_is_not_the_servers_error_is_quoted_short(body: str) -> None:
    error = answer(400, body)
    assert error.code is None
    assert len(str(to_sandbox_error(error, "read 'f'"))) < 700


UNREACHABLE = [
    httpx.ConnectError("[Errno 111] Connection refused"),
    httpx.ConnectTimeout("timed out connecting"),
    httpx.ReadError("connection reset"),
    httpx.WriteError("broken pipe"),
    httpx.CloseError("close failed"),
    httpx.RemoteProtocolError("peer closed connection"),
    httpx.LocalProtocolError("illegal header"),
    httpx.ProxyError("proxy refused"),
    httpx.UnsupportedProtocol("no such scheme"),
]
TOO_SLOW = [
    httpx.ReadTimeout("timed out"),
    httpx.WriteTimeout("timed out writing"),
    httpx.PoolTimeout("no connection free"),
]


@pytest.mark.parametrize("error", UNREACHABLE, ids=lambda e: type(e).__name__)
def test_a_connection_that_failed_is_an_unreachable_server(error: httpx.HTTPError) -> None:
    translated = to_sandbox_error(error, "read 'f'")
    assert type(translated) is SandboxTerminalError
    assert f"could not be reached ({error})" in str(translated)


@pytest.mark.parametrize("error", TOO_SLOW, ids=lambda e: type(e).__name__)
def test_a_timeout_past_the_connect_is_a_server_too_slow(error: httpx.HTTPError) -> None:
    translated = to_sandbox_error(error, "read 'f'")
    assert type(translated) is SandboxTerminalError
    assert f"did not answer in time ({error})" in str(translated)


@pytest.mark.parametrize(
    "error",
    [httpx.DecodingError("bad gzip"), httpx.TooManyRedirects("redirect loop")],
    ids=lambda e: type(e).__name__,
)
def test_any_other_request_failure_fails_the_task_with_its_words(error: httpx.HTTPError) -> None:
    translated = to_sandbox_error(error, "read 'f'")
    assert type(translated) is SandboxTerminalError
    assert str(translated) == f"Could not read 'f': {error}."


@pytest.mark.parametrize("status", [400, 404, 503])
def test_a_status_raised_by_httpx_itself_is_judged_by_its_status(status: int) -> None:
    response = httpx.Response(status, request=REQUEST)
    error = httpx.HTTPStatusError("status", request=REQUEST, response=response)
    assert status_of(error) == status
    recoverable = type(to_sandbox_error(error, "read 'f'")) is SandboxError
    assert recoverable is (status == 400)
