"""
Each reach into another package's internals works on the pinned versions, and says once, with
the version, what is lost where the shape it reaches for has moved.
"""

from __future__ import annotations

import logging
import ssl
from datetime import timedelta

import httpx
import opensandbox.exceptions
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider import _reaches
from opensandbox_provider._connection_config import ConnectionConfig, _ssl_context_of
from opensandbox_provider._errors import api_exception, to_sandbox_error
from opensandbox_provider.execd import _http

SDK_VERSION = _reaches.installed_version("opensandbox")
HTTPCORE_VERSION = _reaches.installed_version("httpcore")


@pytest.fixture(autouse=True)
def nothing_warned_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_reaches, "_warned", set())


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == _reaches.__name__ and record.levelno == logging.WARNING
    ]


def config() -> ConnectionConfig:
    return ConnectionConfig(domain="127.0.0.1:9", request_timeout=timedelta(seconds=5))


def test_a_moved_shape_is_told_once_with_the_version_and_what_is_lost(caplog) -> None:
    for _ in range(3):
        _reaches.warn_moved("httpcore", "the pool", "Calls are slower.")
    assert warnings_logged(caplog) == [
        f"httpcore {HTTPCORE_VERSION} does not have the pool, which airflow-provider-opensandbox "
        "reaches for. Calls are slower. Install the version of httpcore this provider pins to "
        "get it back."
    ]


# -- The SDK's SSL context, which a connection's ca_bundle adds authorities to ------------


def test_the_pinned_sdk_shares_the_ssl_context_the_ca_bundle_reaches() -> None:
    owned = config().with_transport_if_missing()
    try:
        assert owned.transport is not None
        assert isinstance(_ssl_context_of(owned.transport), ssl.SSLContext)
    finally:
        owned.close_transport_if_owned()


def test_an_sdk_without_that_context_is_refused_naming_its_version() -> None:
    with pytest.raises(SandboxTerminalError, match=f"opensandbox {SDK_VERSION}.*SSL_CERT_FILE"):
        _ssl_context_of(httpx.MockTransport(lambda request: httpx.Response(200)))


# -- httpcore's network backend, which keeps each call's deadline -------------------------


def test_the_pinned_sdks_transport_keeps_deadlines_without_a_word(caplog) -> None:
    config().with_transport_if_missing().close_transport_if_owned()
    assert warnings_logged(caplog) == []


def test_a_transport_whose_pool_moved_says_deadlines_are_not_kept(caplog) -> None:
    config()._prepare(httpx.MockTransport(lambda request: httpx.Response(200)))
    (warning,) = warnings_logged(caplog)
    assert warning.startswith(f"opensandbox {SDK_VERSION} does not have the httpcore connection")
    assert f"httpcore {HTTPCORE_VERSION}" in warning and "past its deadline" in warning


# -- httpcore's parser state, which the command stream's fast path reads past -------------


def test_an_httpcore_connection_of_another_shape_says_the_fast_path_is_lost(caplog) -> None:
    response = httpx.Response(
        200,
        headers={"Transfer-Encoding": "chunked"},
        stream=httpx.ByteStream(b""),
        extensions={"network_stream": object()},
    )
    assert _http._socket_stream(response) is None
    (warning,) = warnings_logged(caplog)
    assert warning.startswith(f"httpcore {HTTPCORE_VERSION} does not have the HTTP/1.1")
    assert "several times slower" in warning


def test_a_transport_with_no_socket_falls_back_without_a_word(caplog) -> None:
    response = httpx.Response(
        200, headers={"Transfer-Encoding": "chunked"}, stream=httpx.ByteStream(b"")
    )
    assert _http._socket_stream(response) is None
    assert warnings_logged(caplog) == []


# -- The SDK's exception constructors, which our own requests' errors are built with -----


class MovedApiException(opensandbox.exceptions.SandboxApiException):
    """An SDK release whose exception takes other arguments."""

    def __init__(self, text: str, *, status: int) -> None:
        super().__init__(text, status_code=status)


class MovedConnectionException(opensandbox.exceptions.SandboxConnectionException):
    def __init__(self, text: str, *, reason: str) -> None:
        super().__init__(text)


def test_an_error_answer_with_a_moved_exception_stays_the_answers_error(
    monkeypatch, caplog
) -> None:
    monkeypatch.setattr(opensandbox.exceptions, "SandboxApiException", MovedApiException)
    answer = httpx.Response(502, content=b"upstream connection reset")
    error = api_exception(answer, "Get egress policy")
    assert type(error) is SandboxTerminalError
    assert str(error) == "Get egress policy failed: upstream connection reset (HTTP 502)."
    (warning,) = warnings_logged(caplog)
    assert warning.startswith(f"opensandbox {SDK_VERSION} does not have a MovedApiException")


def test_a_transport_error_with_a_moved_exception_stays_the_transport_error(
    monkeypatch, caplog
) -> None:
    monkeypatch.setattr(
        opensandbox.exceptions, "SandboxConnectionException", MovedConnectionException
    )
    error = to_sandbox_error(httpx.ConnectError("[Errno 111] Connection refused"), "reach it")
    assert type(error) is SandboxTerminalError
    assert str(error) == "Network connectivity error: [Errno 111] Connection refused."
    assert len(warnings_logged(caplog)) == 1


def test_a_moved_server_error_record_quotes_the_body_instead(monkeypatch, caplog) -> None:
    class MovedRecord:
        UNEXPECTED_RESPONSE = "UNEXPECTED_RESPONSE"

        def __init__(self) -> None:
            pass

    monkeypatch.setattr(opensandbox.exceptions, "SandboxError", MovedRecord)
    body = b'{"code": "FILE_NOT_FOUND", "message": "no such file"}'
    error = api_exception(httpx.Response(404, content=body), "Read file")
    assert getattr(error, "status_code", None) == 404
    assert "no such file" in str(error)
    assert len(warnings_logged(caplog)) == 1
