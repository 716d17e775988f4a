"""
How a foreground command ended, learned from execd after its event stream broke.

execd runs a command on its own clock and keeps its status (docs/execd-wire.rst, wire-status),
so a stream that stalls or drops is not a lost command: its end is asked for by id, on a fresh
connection, until execd says. It is given up on, and the caller destroys the sandbox to end it,
only when execd answers nothing for :data:`EXECD_UNREACHABLE_BOUND` seconds since it last showed
it was there and to one last status request after that, or at the deadline's backstop. Output
written after the break cannot be read back (execd's log endpoint refuses a foreground command,
wire-logs): the result keeps what arrived and says the rest may be missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider._clients import read_at_most
from opensandbox_provider._errors import status_of, transport_errors
from opensandbox_provider.execd._command_id import in_path
from opensandbox_provider.execd._command_status import MAX_STATUS_BODY, CommandStatus, parse_status
from opensandbox_provider.execd._deadline import bounded_by
from opensandbox_provider.execd._http import SandboxHttp

# How long execd may answer nothing at all, counted from when it last showed it was there,
# before the sandbox is taken for frozen or gone: the stream's stall window and the ping that
# follows it (10 s and 15 s in ._execd), so a frozen sandbox is given up as soon as both have
# gone unanswered, or at the backstop of the deadline plus its grace, whichever comes first.
# A network blip shorter than that is ridden out (the 15 s drop of the network-fault proofs).
EXECD_UNREACHABLE_BOUND = 25.0
# The stream's break may come at the bound itself (a ping held for its whole window): execd is
# still asked once for the command's status, this long at least, so a blip that ended with the
# ping is recovered from rather than taken for a frozen sandbox.
LAST_STATUS_TIMEOUT = 1.0
# How often execd is asked while the command still runs: a status read costs one small request.
STATUS_POLL_INTERVAL = 1.0
# How long one status request may take; a healthy execd answers in milliseconds.
STATUS_REQUEST_TIMEOUT = 5.0


@dataclass(frozen=True)
class Recovered:
    """
    What execd said after the break: the command's ``status`` once it ended, or ``None`` when
    execd has no record of it (a sandbox that is gone, or replaced, answers so).
    """

    status: CommandStatus | None


@dataclass(frozen=True)
class GaveUp:
    """The command was given up on; ``why`` is a clause for a sentence."""

    why: str


def await_end(
    http: SandboxHttp,
    port: int,
    command_id: str,
    *,
    last_contact: float,
    give_up_at: float,
    overran: str,
    gone: Callable[[], bool],
) -> Recovered | GaveUp:
    """
    Ask execd for command ``command_id`` until it has ended; give up as the module says.

    ``last_contact`` is when execd last showed it was there (a byte of the stream, an answered
    ping), ``give_up_at`` the command's backstop, and ``overran`` the clause that says it passed.
    ``gone`` asks the server whether the sandbox still exists; it is asked only after a quick
    refusal, which a killed sandbox gives and a network blip does not.
    """
    asked = False
    while True:
        now = time.monotonic()
        if now >= give_up_at:
            return GaveUp(overran)
        unreachable_at = last_contact + EXECD_UNREACHABLE_BOUND
        if now >= unreachable_at and asked:
            return GaveUp(
                f"the stream broke and execd then answered nothing for {EXECD_UNREACHABLE_BOUND:g}s"
            )
        # Past the bound only the one last question is left, and it gets its own short time.
        ask_until = max(unreachable_at, now + LAST_STATUS_TIMEOUT)
        answer = _ask(
            http, port, command_id, min(STATUS_REQUEST_TIMEOUT, ask_until - now, give_up_at - now)
        )
        asked = True
        if isinstance(answer, CommandStatus):
            last_contact = time.monotonic()
            if answer.ended:
                return Recovered(answer)
        elif answer == _UNKNOWN:
            return Recovered(None)
        elif answer == _REFUSED and _known_gone(gone, ask_until):
            return Recovered(None)
        now = time.monotonic()
        until_bound = last_contact + EXECD_UNREACHABLE_BOUND - now
        time.sleep(max(0.0, min(STATUS_POLL_INTERVAL, give_up_at - now, until_bound)))


# What a status request can come to besides a status.
_UNKNOWN = "unknown"  # execd, or the server for it, has no such command: a 404
_REFUSED = "refused"  # something answered, quickly, but not with a status
_SILENT = "silent"  # nothing answered within the timeout


def _ask(http: SandboxHttp, port: int, command_id: str, timeout: float) -> CommandStatus | str:
    try:
        # For the whole answer, not each read of it, as every wait on the sandbox is.
        with (
            bounded_by(time.monotonic() + timeout),
            http.stream(
                "GET",
                port,
                f"/command/status/{in_path(command_id)}",
                "Read a command's status",
                expect=200,
                timeout=timeout,
            ) as response,
        ):
            body = read_at_most(response, MAX_STATUS_BODY)
    except httpx.TimeoutException:
        return _SILENT
    except transport_errors() as e:
        # A 404 is execd's "command not found", or the server's for a sandbox it no longer
        # has; a proxy in between answers for a sandbox it cannot reach with a 502 or 503.
        return _UNKNOWN if status_of(e) == 404 else _REFUSED
    try:
        return parse_status(body, command_id)
    except SandboxError:
        return _REFUSED


def _known_gone(gone: Callable[[], bool], ask_until: float) -> bool:
    """
    Whether the server says the sandbox is gone; a server that cannot say is no answer.

    Asked within one status request's time and never past the time the recovery may still ask:
    the SDK retries a failed request, waiting its full request timeout each try, so a restarting
    server or a lossy link would otherwise hold the recovery past its bound, and a command execd
    could still have answered for would be given up.
    """
    deadline = min(time.monotonic() + STATUS_REQUEST_TIMEOUT, ask_until)
    try:
        with bounded_by(deadline):
            return gone()
    except transport_errors():
        return False
