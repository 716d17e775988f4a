"""
Failures become ``SandboxError`` or ``SandboxTerminalError`` here, only here, by one table.

The line is the toolset's: a ``SandboxError`` goes back to the model as something it may work
around (a bad path, a command the server refused), a ``SandboxTerminalError`` fails the task so
Airflow retries it (credentials refused, the server unreachable, the sandbox gone). The SDK's
exceptions, httpx's and :class:`ErrorAnswer` (an error answer to a request of our own) are
looked up in one table by class, as httpx maps httpcore's exceptions to its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxTerminalError

from opensandbox_provider._sdk import OpenSandboxNotInstalled

# Statuses that say this request was wrong, not that the sandbox or the server is: the
# model can change the request. 500 is execd's RUNTIME_ERROR (a permission, a path that
# runs through a file); the gateway statuses above it mean execd is not answering at all.
_REQUEST_STATUSES = frozenset({400, 409, 413, 416, 422, 500})
# A server message is quoted only this far into ours.
_MAX_DETAIL = 500
# What would end a line of the task log, or forge one, if quoted as it came: control
# characters, Unicode's own line and paragraph separators, and lone surrogates, which no
# log handler can encode.
_UNQUOTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def quoted(text: object, limit: int = _MAX_DETAIL) -> str:
    """
    Text from the server or the sandbox as an error may quote it: its first ``limit``
    characters, on one line, with anything that could end the line escaped as Python writes it.
    """
    shown = str(text)
    if len(shown) > limit:
        shown = shown[:limit] + "..."
    return _UNQUOTABLE.sub(lambda match: repr(match.group())[1:-1], shown)


class ErrorAnswer(httpx.HTTPStatusError):
    """
    An error answer to a request this provider made itself: its status, and the server's code
    and message when its body is the server's JSON error (docs/execd-wire.rst, wire-errors).
    ``response`` holds the body as far as it was read, which the caller bounds.
    """

    def __init__(self, response: httpx.Response, operation: str) -> None:
        self.status_code = response.status_code
        self.code, message = _server_error_in(response.content)
        said = message or f"{operation} failed: HTTP {self.status_code}"
        if self.code is None:
            # Not the server's error: what answered instead (a proxy, a guest) is quoted.
            text = response.content.decode("utf-8", errors="replace").strip()
            said += f": {quoted(text)}" if text else ""
        # The server's own words, which a translated error quotes.
        self.said = said
        super().__init__(
            f"{operation} failed: {said}" if message else said,
            request=response.request,
            response=response,
        )


def _server_error_in(body: bytes) -> tuple[str | None, str]:
    """
    The code and message of the server's JSON error in ``body``, or ``(None, "")`` when it is
    not one. FastAPI's ``HTTPException`` wraps the server's error in ``detail``.
    """
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return None, ""
    if isinstance(parsed, dict) and isinstance(parsed.get("detail"), dict):
        parsed = parsed["detail"]
    if isinstance(parsed, dict) and parsed.get("code"):
        return str(parsed["code"]), str(parsed.get("message") or "")
    return None, ""


def status_of(error: BaseException) -> int | None:
    """The HTTP status an error answer carries, ours or the SDK's, if it carries one."""
    status = getattr(error, "status_code", None)
    if status is None and isinstance(error, httpx.HTTPStatusError):
        status = error.response.status_code
    return status if isinstance(status, int) else None


def _sdk_exception(name: str) -> tuple[type[Exception], ...]:
    """The SDK's exception ``name``, for an ``except``; none without the SDK, as none is raised."""
    try:
        from opensandbox import exceptions
    except ImportError:
        return ()
    return (getattr(exceptions, name),)


def sdk_exceptions() -> tuple[type[Exception], ...]:
    """The SDK's base exception, which its calls fail with (see :func:`_sdk_exception`)."""
    return _sdk_exception("SandboxException")


def api_exceptions() -> tuple[type[Exception], ...]:
    """The SDK's exception for an error answer, the one that carries a status."""
    return _sdk_exception("SandboxApiException")


def transport_errors() -> tuple[type[Exception], ...]:
    """
    What a request to the server or a sandbox fails with: the SDK's exceptions, httpx's (an
    :class:`ErrorAnswer` among them), the contract's, and a socket's own. Caught by name, never
    as ``Exception``: Airflow's task timeout is an ``Exception`` on Airflow 2, and a handler
    that carries on must not catch it.
    """
    return (SandboxError, httpx.HTTPError, OSError, *sdk_exceptions())


def _translatable() -> tuple[type[Exception], ...]:
    """What :func:`to_sandbox_error` translates: every failure :func:`_table` has a row for."""
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


# What each kind of failure means, as :func:`to_sandbox_error` words it: ``doing`` completes
# "Could not ...", ``detail`` is the failure's own words.
_Meaning = Callable[[str, str, int | None, bool], SandboxError]


def _unreachable(doing: str, detail: str, status: int | None, terminal: bool) -> SandboxError:
    return SandboxTerminalError(
        f"Could not {doing}: the OpenSandbox server or the sandbox could not be reached "
        f"({detail}). Check that the server is running and that the connection's host and "
        "port point at it."
    )


def _too_slow(doing: str, detail: str, status: int | None, terminal: bool) -> SandboxError:
    return SandboxTerminalError(
        f"Could not {doing}: the OpenSandbox server did not answer in time ({detail}). Check "
        "the server's health, or raise the connection's request_timeout."
    )


def _answered(doing: str, detail: str, status: int | None, terminal: bool) -> SandboxError:
    if status in (401, 403):
        return SandboxTerminalError(
            f"Could not {doing}: the OpenSandbox server refused the API key ({detail}). Set "
            "the connection's password to the api_key the server is configured with."
        )
    # Without a caller that blames a path, a 404 is about the sandbox or the server.
    if status in _REQUEST_STATUSES and not terminal:
        return SandboxError(f"Could not {doing}: {detail}.")
    return SandboxTerminalError(f"Could not {doing}: {detail}.")


def _refused_here(doing: str, detail: str, status: int | None, terminal: bool) -> SandboxError:
    # The SDK refused the request before sending it: the model can change it.
    message = f"Could not {doing}: {detail}."
    return SandboxTerminalError(message) if terminal else SandboxError(message)


def _failed(doing: str, detail: str, status: int | None, terminal: bool) -> SandboxError:
    return SandboxTerminalError(f"Could not {doing}: {detail}.")


def _table() -> list[tuple[tuple[type[BaseException], ...], _Meaning]]:
    """
    Each failure's meaning by its class, the first row it is an instance of giving it: a
    connect that timed out never reached the server, so it is unreachable, not slow.
    """
    return [
        ((httpx.HTTPStatusError,), _answered),
        ((httpx.ConnectTimeout, httpx.NetworkError), _unreachable),
        ((httpx.TimeoutException,), _too_slow),
        ((httpx.TransportError,), _unreachable),
        ((httpx.HTTPError,), _failed),
        # Without the SDK these are empty, and match nothing.
        (_sdk_exception("SandboxApiException"), _answered),
        (_sdk_exception("SandboxConnectionException"), _unreachable),
        (_sdk_exception("SandboxTimeoutException"), _too_slow),
        (_sdk_exception("InvalidArgumentException"), _refused_here),
        (_sdk_exception("SandboxException"), _failed),
    ]


def to_sandbox_error(
    error: BaseException, doing: str, *, terminal: bool = False
) -> SandboxError | None:
    """
    The sandbox error ``error`` stands for (see :func:`_table`), or ``None`` when it is not a
    failure of the SDK or of a request. ``doing`` completes "Could not ..."; ``terminal`` makes
    every failure terminal, for calls the model has no part in, such as provisioning.
    """
    if isinstance(error, SandboxError):
        return error
    if isinstance(error, OpenSandboxNotInstalled):
        return SandboxTerminalError(str(error))
    for kinds, meaning in _table():
        if isinstance(error, kinds):
            return meaning(doing, _detail(error), status_of(error), terminal)
    return None


@contextmanager
def as_sandbox_errors(
    doing: str, *, terminal: bool = False, missing: Callable[[], SandboxError] | None = None
) -> Iterator[None]:
    """
    Raise what :func:`to_sandbox_error` makes of any SDK or request failure in the block.
    ``missing`` answers a 404, which a file API gives for a missing path and a missing sandbox
    alike: it confirms the sandbox exists (raising if not) and returns the path's error.
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
    """The failure's own words, the server's with its status and code, to quote in ours."""
    if isinstance(error, ErrorAnswer):
        text, code = error.said, error.code
    else:
        # The SDK's exceptions keep the server's error record as ``error``.
        record = getattr(error, "error", None)
        text = getattr(record, "message", None) or (error.args[0] if error.args else "")
        code = getattr(record, "code", None)
    text = quoted(str(text).strip().rstrip(".") or type(error).__name__)
    status = status_of(error)
    if status is None:
        return text
    label = f"HTTP {status}" + (f" {code}" if code and code != "UNEXPECTED_RESPONSE" else "")
    return f"{text} [{label}]"
