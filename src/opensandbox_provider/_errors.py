"""
SDK and transport exceptions become ``SandboxError`` or ``SandboxTerminalError`` here, only here.

The line between the two is the toolset's: a ``SandboxError`` goes back to the model as
something it may work around (a bad path, a command the server refused), a
``SandboxTerminalError`` fails the task so Airflow retries it (credentials refused, the
server unreachable, the sandbox gone).

The requests this backend makes itself fail as the SDK's own do: an error answer or an
httpx error becomes the exception the SDK would raise for it, built here because the SDK
builds them in its adapter layer, which is not its public API. A unit test pins the two.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxTerminalError

from opensandbox_provider._reaches import warn_moved
from opensandbox_provider._sdk import OpenSandboxNotInstalled

if TYPE_CHECKING:
    from opensandbox.exceptions import SandboxApiException, SandboxException
    from opensandbox.exceptions import SandboxError as SdkError

# Statuses that say this request was wrong, not that the sandbox or the server is: the
# model can change the request. 500 is execd's RUNTIME_ERROR (a permission, a path that
# runs through a file); the gateway statuses above it mean execd is not answering at all.
_REQUEST_STATUSES = frozenset({400, 409, 413, 416, 422, 500})
# A server message is quoted only this far into ours.
_MAX_DETAIL = 500
# The statuses the SDK marks retryable on the exceptions it builds, as its retry policy does.
_RETRYABLE_STATUSES = frozenset({429, 502, 503})
# An answer that is not the server's JSON error is quoted this far into the SDK's message.
_MAX_RAW_BODY = 512
# What would end a line of the task log, or forge one, if quoted as it came: control
# characters, Unicode's own line and paragraph separators, and lone surrogates, which no
# log handler can encode.
_UNQUOTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# An SDK exception class, as :func:`_built` returns it.
_Built = TypeVar("_Built", bound="SandboxException")


def quoted(text: object, limit: int = _MAX_DETAIL) -> str:
    """
    Text from the server or the sandbox as an error may quote it: its first ``limit``
    characters, on one line, with anything that could end the line escaped as Python writes it.
    """
    shown = str(text)
    if len(shown) > limit:
        shown = shown[:limit] + "..."
    return _UNQUOTABLE.sub(lambda match: repr(match.group())[1:-1], shown)


def status_of(error: BaseException) -> int | None:
    """The HTTP status an SDK exception carries, if it carries one."""
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


def sdk_exceptions() -> tuple[type[Exception], ...]:
    """
    The SDK's base exception, which its calls fail with, for an ``except`` clause; none when
    the SDK is not installed, since then no call can raise it.
    """
    try:
        from opensandbox.exceptions import SandboxException
    except ImportError:
        return ()
    return (SandboxException,)


def api_exceptions() -> tuple[type[Exception], ...]:
    """The SDK's exception for an error answer, the one that carries a status; as above."""
    try:
        from opensandbox.exceptions import SandboxApiException
    except ImportError:
        return ()
    return (SandboxApiException,)


def transport_errors() -> tuple[type[Exception], ...]:
    """
    What a request to the server or a sandbox fails with: the SDK's exceptions, httpx's, the
    contract's, and a socket's own. Caught by name, never as ``Exception``: Airflow's task
    timeout is an ``Exception`` on Airflow 2, and a handler that carries on must not catch it.
    """
    return (SandboxError, httpx.HTTPError, OSError, *sdk_exceptions())


def _translatable() -> tuple[type[Exception], ...]:
    """What :func:`to_sandbox_error` translates."""
    return (httpx.HTTPError, OpenSandboxNotInstalled, *sdk_exceptions())


def done_unless_missing(call: Callable[[], object]) -> bool:
    """Run ``call``; ``False`` when the server answers 404, as for what is already gone."""
    try:
        call()
    except api_exceptions() as e:
        if status_of(e) != 404:
            raise
        return False
    return True


def to_sandbox_error(
    error: BaseException, doing: str, *, terminal: bool = False
) -> SandboxError | None:
    """
    The sandbox error ``error`` stands for, or ``None`` when it is not an SDK or transport error.

    ``doing`` completes "Could not ..." in the message. ``terminal`` makes every failure
    terminal, for calls the model has no part in, such as provisioning.
    """
    if isinstance(error, SandboxError):
        return error
    if isinstance(error, OpenSandboxNotInstalled):
        return SandboxTerminalError(str(error))
    from opensandbox.exceptions import (
        InvalidArgumentException,
        SandboxApiException,
        SandboxConnectionException,
        SandboxException,
        SandboxTimeoutException,
    )

    if isinstance(error, httpx.HTTPError):
        error = _sdk_exception(error)
        if isinstance(error, SandboxError):
            return error
    if not isinstance(error, SandboxException):
        return None
    status = status_of(error)
    detail = _detail(error)
    if isinstance(error, SandboxApiException) and status in (401, 403):
        return SandboxTerminalError(
            f"Could not {doing}: the OpenSandbox server refused the API key ({detail}). Set the "
            "connection's password to the api_key the server is configured with."
        )
    if isinstance(error, SandboxApiException) and status == 404:
        # Without a ``missing`` answer a 404 is about the sandbox or the server, not a path.
        return SandboxTerminalError(f"Could not {doing}: {detail}.")
    if isinstance(error, SandboxConnectionException):
        return SandboxTerminalError(
            f"Could not {doing}: the OpenSandbox server or the sandbox could not be reached "
            f"({detail}). Check that the server is running and that the connection's host and "
            "port point at it."
        )
    if isinstance(error, SandboxTimeoutException):
        return SandboxTerminalError(
            f"Could not {doing}: the OpenSandbox server did not answer in time ({detail}). Check "
            "the server's health, or raise the connection's request_timeout."
        )
    recoverable = isinstance(error, InvalidArgumentException) or status in _REQUEST_STATUSES
    message = f"Could not {doing}: {detail}."
    if recoverable and not terminal:
        return SandboxError(message)
    return SandboxTerminalError(message)


@contextmanager
def as_sandbox_errors(
    doing: str,
    *,
    terminal: bool = False,
    missing: Callable[[], SandboxError] | None = None,
) -> Iterator[None]:
    """
    Raise what :func:`to_sandbox_error` makes of any SDK or transport error in the block.

    ``missing`` answers a 404, which a file API returns both for a path that does not
    exist and for a sandbox that does not: it confirms the sandbox exists (raising if it
    does not) and returns the error for the path.
    """
    try:
        yield
    except _translatable() as e:
        if missing is not None and status_of(e) == 404:
            raise missing() from e
        translated_error = to_sandbox_error(e, doing, terminal=terminal)
        if translated_error is None:
            raise
        raise translated_error from e


def _detail(error: BaseException) -> str:
    """The server's own words for a failure, with its status and code, to quote in ours."""
    from opensandbox.exceptions import SandboxApiException

    sdk_error = getattr(error, "error", None)
    text = (
        getattr(sdk_error, "message", None)
        or (error.args[0] if error.args else "")
        or type(error).__name__
    )
    text = quoted(str(text).strip().rstrip("."))
    if isinstance(error, SandboxApiException) and error.status_code is not None:
        code = getattr(sdk_error, "code", None)
        label = f"HTTP {error.status_code}" + (
            f" {code}" if code and code != "UNEXPECTED_RESPONSE" else ""
        )
        return f"{text} [{label}]"
    return text


def api_exception(
    response: httpx.Response, operation: str
) -> SandboxApiException | SandboxTerminalError:
    """
    The SDK's exception for the error answer ``response`` to ``operation``, already read.

    A 429's ``retry_after`` is left unset: this backend never waits to retry one, it fails
    the task (see :func:`to_sandbox_error`). An SDK whose exceptions no longer take these
    arguments gets :func:`_unbuilt`'s error instead.
    """
    from opensandbox.exceptions import SandboxApiException, SandboxRateLimitException

    status = response.status_code
    body = response.content
    sdk_error = _sdk_error_in(body)
    message = f"{operation} failed: HTTP {status}"
    if sdk_error is not None and sdk_error.message:
        message = f"{operation} failed: {sdk_error.message}"
    elif sdk_error is None:
        text = body.decode("utf-8", errors="replace").strip()
        if len(text) > _MAX_RAW_BODY:
            text = text[:_MAX_RAW_BODY] + "…"
        if text:
            message = f"{message}: {text}"
    request_id = response.headers.get("x-request-id", "").strip() or None
    exception = SandboxRateLimitException if status == 429 else SandboxApiException
    return _built(
        exception,
        message=message,
        status_code=status,
        request_id=request_id,
        error=sdk_error,
        response_body=body,
        is_retryable=status in _RETRYABLE_STATUSES,
    )


def _sdk_exception(error: httpx.HTTPError) -> SandboxException | SandboxTerminalError:
    """The exception the SDK raises when one of its own requests meets ``error``."""
    from opensandbox.exceptions import (
        SandboxConnectionException,
        SandboxInternalException,
        SandboxTimeoutException,
    )

    if isinstance(error, httpx.HTTPStatusError):
        # Neither the SDK's requests nor ours let one out. Should one arrive, it gets the SDK's
        # class, status and server error; only the wording of the message is not the SDK's.
        return api_exception(error.response, "API call")
    # A connect that times out never reached the server: unreachable, as the SDK counts it.
    if isinstance(error, httpx.ConnectTimeout | httpx.NetworkError):
        return _built(
            SandboxConnectionException,
            message=f"Network connectivity error: {error}",
            cause=error,
            is_retryable=True,
        )
    if isinstance(error, httpx.TimeoutException):
        return _built(SandboxTimeoutException, message=f"Request timed out: {error}", cause=error)
    if isinstance(error, httpx.TransportError):
        return _built(
            SandboxConnectionException, message=f"Network connectivity error: {error}", cause=error
        )
    return _built(
        SandboxInternalException, message=f"Unexpected SDK error occurred: {error}", cause=error
    )


def _built(
    exception: type[_Built], *, message: str, **arguments: Any
) -> _Built | SandboxTerminalError:
    """``exception`` built as the SDK's adapter builds it, or :func:`_unbuilt`'s error."""
    try:
        return exception(message=message, **arguments)
    except TypeError:
        return _unbuilt(exception, message, arguments.get("status_code"))


def _unbuilt(exception: type[Exception], message: str, status: int | None) -> SandboxTerminalError:
    """
    What stands for an SDK exception whose constructor no longer takes what the SDK's own
    adapter passed it: a terminal error with the failure's own message, so that the failure
    is reported as it happened rather than as the ``TypeError`` of building its exception.
    Terminal, since without the SDK's classes nothing tells a request to change from a
    sandbox that is gone.
    """
    warn_moved(
        "opensandbox",
        f"a {exception.__name__} constructor taking the arguments its own adapter passes",
        "Errors of the requests this provider makes itself lose their SDK class and status "
        "and all fail the task.",
    )
    # The status goes into the words, since the class that would carry it could not be built.
    return SandboxTerminalError(f"{message}" + (f" (HTTP {status})." if status else "."))


def _sdk_error_in(body: bytes) -> SdkError | None:
    """
    The code and message of the server's JSON error in ``body``, as the SDK reads them.

    A body that is not JSON is kept whole as an ``UNEXPECTED_RESPONSE``; JSON without a code
    gives ``None``, and the caller quotes the body instead.
    """
    from opensandbox.exceptions import SandboxError as SdkError

    if not body:
        return None
    text = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return _server_error(SdkError.UNEXPECTED_RESPONSE, text)
    except (ValueError, RecursionError):
        # JSON nested too deep, or with a number too long, to parse: the SDK finds no error.
        return None
    # FastAPI's HTTPException wraps the server's error in ``detail``.
    if isinstance(parsed, dict) and isinstance(parsed.get("detail"), dict):
        parsed = parsed["detail"]
    if isinstance(parsed, dict) and parsed.get("code"):
        return _server_error(parsed["code"], parsed.get("message") or "")
    return None


def _server_error(code: Any, message: str) -> SdkError | None:
    """The SDK's record of a server error, or ``None`` (the body is quoted instead) if it moved."""
    from opensandbox.exceptions import SandboxError as SdkError

    try:
        return SdkError(code, message)
    except TypeError:
        warn_moved(
            "opensandbox",
            "a SandboxError (error record) constructor taking a code and a message",
            "Errors of the requests this provider makes itself quote the server's answer "
            "without its error code.",
        )
        return None
