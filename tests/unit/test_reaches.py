"""
Each reach into another package's internals works on the pinned versions, and says once, with
the version, what is lost where the shape it reaches for has moved.
"""

from __future__ import annotations

import logging

import httpx
import opensandbox.exceptions
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider import _reaches
from opensandbox_provider._errors import api_exception, to_sandbox_error

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


def test_a_moved_shape_is_told_once_with_the_version_and_what_is_lost(caplog) -> None:
    for _ in range(3):
        _reaches.warn_moved("httpcore", "the pool", "Calls are slower.")
    assert warnings_logged(caplog) == [
        f"httpcore {HTTPCORE_VERSION} does not have the pool, which airflow-provider-opensandbox "
        "reaches for. Calls are slower. Install the version of httpcore this provider pins to "
        "get it back."
    ]


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
