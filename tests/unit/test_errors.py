"""SDK and transport exceptions, translated in one place into what the toolset acts on.

The exceptions are built as the SDK builds them; a server cannot be made to answer each of
these statuses on demand.
"""

from __future__ import annotations

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxTerminalError
from opensandbox.exceptions import (
    InvalidArgumentException,
    SandboxApiException,
    SandboxConnectionException,
    SandboxReadyTimeoutException,
    SandboxTimeoutException,
)
from opensandbox.exceptions import (
    SandboxError as SdkError,
)

from opensandbox_provider._errors import as_sandbox_errors, to_sandbox_error
from opensandbox_provider._sdk import OpenSandboxNotInstalled


def api_error(
    status: int, code: str = "X", message: str = "the server's words"
) -> SandboxApiException:
    return SandboxApiException(
        f"Call failed: {message}", status_code=status, error=SdkError(code, message)
    )


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_api_key_is_terminal(status: int) -> None:
    error = to_sandbox_error(api_error(status, "INVALID_API_KEY"), "list files")
    assert type(error) is SandboxTerminalError
    assert "API key" in str(error) and f"HTTP {status}" in str(error)


@pytest.mark.parametrize("status", [400, 409, 422, 500])
def test_a_refused_request_is_recoverable_and_quotes_the_server(status: int) -> None:
    error = to_sandbox_error(
        api_error(status, "RUNTIME_ERROR", "path is not a directory"), "list 'x'"
    )
    assert type(error) is SandboxError
    assert (
        str(error) == f"Could not list 'x': path is not a directory [HTTP {status} RUNTIME_ERROR]."
    )


@pytest.mark.parametrize("status", [400, 500])
def test_a_refused_request_is_terminal_where_the_model_has_no_part(status: int) -> None:
    error = to_sandbox_error(api_error(status), "create a sandbox", terminal=True)
    assert type(error) is SandboxTerminalError


@pytest.mark.parametrize("status", [404, 429, 502, 503, 504])
def test_a_missing_sandbox_or_an_unavailable_server_is_terminal(status: int) -> None:
    assert type(to_sandbox_error(api_error(status), "run a command")) is SandboxTerminalError


@pytest.mark.parametrize(
    "error",
    [
        SandboxConnectionException("Network connectivity error: [Errno 111] Connection refused"),
        httpx.ConnectError("[Errno 111] Connection refused"),
        httpx.RemoteProtocolError("peer closed connection"),
    ],
)
def test_an_unreachable_server_is_terminal(error: Exception) -> None:
    translated_error = to_sandbox_error(error, "reach the sandbox")
    assert type(translated_error) is SandboxTerminalError
    assert "could not be reached" in str(translated_error)


@pytest.mark.parametrize(
    "error",
    [SandboxTimeoutException("Request timed out"), httpx.ReadTimeout("timed out")],
)
def test_a_server_that_does_not_answer_in_time_is_terminal(error: Exception) -> None:
    assert "did not answer in time" in str(to_sandbox_error(error, "read a file"))


def test_a_readiness_timeout_is_terminal() -> None:
    error = SandboxReadyTimeoutException("Sandbox health check timed out after 5.0s")
    assert type(to_sandbox_error(error, "create a sandbox")) is SandboxTerminalError


def test_a_request_the_sdk_refuses_locally_is_recoverable() -> None:
    error = to_sandbox_error(InvalidArgumentException("Command cannot be empty"), "run a command")
    assert type(error) is SandboxError


def test_a_missing_sdk_says_how_to_install_it() -> None:
    error = to_sandbox_error(OpenSandboxNotInstalled("pip install it"), "create a sandbox")
    assert type(error) is SandboxTerminalError and "pip install" in str(error)


def test_sandbox_errors_pass_through_unchanged() -> None:
    original = SandboxError("already translated")
    assert to_sandbox_error(original, "anything") is original


def test_an_error_that_is_not_the_sdks_is_left_alone() -> None:
    assert to_sandbox_error(KeyError("bug"), "anything") is None
    with pytest.raises(KeyError):
        with as_sandbox_errors("anything"):
            raise KeyError("bug")


def test_a_404_on_a_path_is_answered_by_the_caller() -> None:
    with pytest.raises(SandboxError, match="no such path") as raised:
        with as_sandbox_errors("read 'x'", missing=lambda: SandboxError("no such path")):
            raise api_error(404, "FILE_NOT_FOUND")
    assert type(raised.value) is SandboxError
    assert isinstance(raised.value.__cause__, SandboxApiException)


def test_a_404_without_a_path_to_blame_is_terminal() -> None:
    with pytest.raises(SandboxTerminalError):
        with as_sandbox_errors("reconnect to sandbox s"):
            raise api_error(404, "DOCKER::SANDBOX_NOT_FOUND", "Sandbox s not found.")


def test_a_long_server_message_is_shortened() -> None:
    error = to_sandbox_error(api_error(400, message="x" * 5000), "write 'f'")
    assert len(str(error)) < 700
