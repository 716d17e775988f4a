"""The SDK exceptions our own requests fail with are the ones the SDK builds for the same failure.

The SDK builds them in its adapter layer, which is not its public API, so the provider builds
them itself; these tests compare the two, so an SDK release that changes them shows here.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from opensandbox_provider._errors import _sdk_exception, api_exception

REQUEST = httpx.Request("GET", "http://sandbox.test/files/info")


def sdk_private(module: str, name: str) -> Callable[..., Any]:
    """The SDK's ``module.name``, or a failure saying what to re-check."""
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        found = None
    if found is None:
        pytest.fail(
            f"The SDK no longer has {module}.{name}, which opensandbox_provider._errors "
            "restates: compare ours with what the SDK does now, then point this test at it.",
            pytrace=False,
        )
    return found


def sdk_api_exception(response: httpx.Response, operation: str) -> Exception:
    build = sdk_private(
        "opensandbox.adapters.converter.response_handler", "build_api_exception_from_httpx"
    )
    return build(response, operation)


def sdk_converted(error: Exception) -> Exception:
    converter = sdk_private(
        "opensandbox.adapters.converter.exception_converter", "ExceptionConverter"
    )
    return converter.to_sandbox_exception(error)


def described(error: Any) -> dict[str, Any]:
    """Everything a caller can read off an SDK exception."""
    return {
        "type": type(error),
        "str": str(error),
        "args": error.args,
        "status_code": getattr(error, "status_code", None),
        "code": error.error.code,
        "message": error.error.message,
        "request_id": error.request_id,
        "response_body": getattr(error, "response_body", None),
        "is_retryable": error.is_retryable,
        "retry_after": getattr(error, "retry_after", None),
    }


def answer(status: int, body: bytes | str | object, **headers: str) -> httpx.Response:
    if isinstance(body, str):
        body = body.encode()
    elif not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return httpx.Response(status, headers=headers, content=body, request=REQUEST)


ERROR_ANSWERS = {
    "json code and message": answer(400, {"code": "INVALID_PATH", "message": "bad path"}),
    "fastapi detail": answer(404, {"detail": {"code": "FILE_NOT_FOUND", "message": "no file"}}),
    "code without message": answer(409, {"code": "CONFLICT"}),
    "json without code": answer(422, {"detail": "Not Found"}),
    "json list": answer(500, [1, 2]),
    "plain text": answer(500, "upstream connect error\n"),
    "empty": answer(502, b""),
    "blank": answer(503, b"   "),
    "long text": answer(503, "x" * 2000),
    "long json without code": answer(400, {"detail": "y" * 2000}),
    "not utf-8": answer(500, b"\xff\xfe oops"),
    "nested too deep": answer(400, "[" * 100_000),
    "number too long": answer(400, "1" * 5000),
    "rate limited": answer(429, {"code": "RATE_LIMIT", "message": "slow down"}),
    "rate limited as text": answer(429, "Too Many Requests"),
    "request id": answer(500, {"code": "E", "message": "m"}, **{"X-Request-ID": " req-1 "}),
    "blank request id": answer(500, "boom", **{"x-request-id": "  "}),
}


@pytest.mark.parametrize("response", ERROR_ANSWERS.values(), ids=ERROR_ANSWERS.keys())
def test_an_error_answer_becomes_the_exception_the_sdk_builds_for_it(
    response: httpx.Response,
) -> None:
    assert described(api_exception(response, "Get file info")) == described(
        sdk_api_exception(response, "Get file info")
    )


HTTPX_ERRORS = [
    httpx.ConnectError("[Errno 111] Connection refused", request=REQUEST),
    httpx.ConnectTimeout("timed out connecting", request=REQUEST),
    httpx.ReadError("connection reset", request=REQUEST),
    httpx.WriteError("broken pipe", request=REQUEST),
    httpx.CloseError("close failed", request=REQUEST),
    httpx.ReadTimeout("timed out", request=REQUEST),
    httpx.WriteTimeout("timed out writing", request=REQUEST),
    httpx.PoolTimeout("no connection free", request=REQUEST),
    httpx.RemoteProtocolError("peer closed connection", request=REQUEST),
    httpx.LocalProtocolError("illegal header", request=REQUEST),
    httpx.ProxyError("proxy refused", request=REQUEST),
    httpx.UnsupportedProtocol("no such scheme", request=REQUEST),
    httpx.DecodingError("bad gzip", request=REQUEST),
    httpx.TooManyRedirects("redirect loop", request=REQUEST),
]


@pytest.mark.parametrize("error", HTTPX_ERRORS, ids=lambda e: type(e).__name__)
def test_a_transport_error_becomes_the_exception_the_sdk_raises_for_it(
    error: httpx.HTTPError,
) -> None:
    ours = _sdk_exception(error)
    assert described(ours) == described(sdk_converted(error))
    assert ours.__cause__ is error


@pytest.mark.parametrize("status", [400, 404, 429, 500, 503])
def test_a_raised_status_becomes_an_exception_of_the_sdks_class_and_status(status: int) -> None:
    response = answer(status, {"code": "E", "message": "the server's words"})
    error = httpx.HTTPStatusError("status", request=REQUEST, response=response)
    ours, sdks = _sdk_exception(error), sdk_converted(error)
    assert (type(ours), ours.status_code, ours.error.code, ours.error.message) == (
        type(sdks),
        sdks.status_code,
        sdks.error.code,
        sdks.error.message,
    )
