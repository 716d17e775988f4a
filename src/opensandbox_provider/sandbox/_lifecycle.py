"""
The server's lifecycle API, one client per backend: the calls that need no sandbox endpoint.

What a call decides from a sandbox's info (whether it has ended, whether and how far to renew
it) is said here once, for this sync client and the triggerer's async one
(:mod:`._async_lifecycle`).
"""

from __future__ import annotations

import logging
import threading
import weakref
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError, is_sandbox_handle

from opensandbox_provider import _kept, _tags
from opensandbox_provider._errors import (
    api_exceptions,
    as_sandbox_errors,
    done_unless_missing,
    status_of,
    transport_errors,
)
from opensandbox_provider.sandbox._record import seconds_left

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from datetime import datetime

    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.models.sandboxes import SandboxInfo
    from opensandbox.sync.manager import SandboxManagerSync

log = logging.getLogger(__name__)

T = TypeVar("T")

# The lifecycle state of a sandbox that runs nothing and holds nothing, its container gone; a
# Failed one still holds its container, and its image.
TERMINATED = "Terminated"
# Lifecycle states from which a sandbox never runs another command.
ENDED_STATES = frozenset({"Stopping", TERMINATED, "Failed"})


class Lifecycle:
    """
    The lifecycle API alone: no endpoints and no readiness poll, whatever state the
    sandbox is in. One client serves every call, so tag reads and renewals share its
    connections rather than each opening (and, over TLS, handshaking) its own.

    ``config`` gives the server's connection config, read when the client is first needed.
    """

    def __init__(self, config: Callable[[], ConnectionConfigSync]) -> None:
        self._config = config
        self._client: SandboxManagerSync | None = None
        self._lock = threading.Lock()

    @contextmanager
    def call(self, doing: str) -> Iterator[SandboxManagerSync]:
        """The client, with what goes wrong in the block reported as a failure to ``doing``."""
        with as_sandbox_errors(doing):
            yield self._api()

    def info(self, sandbox: str, *, doing: str) -> SandboxInfo:
        if not is_sandbox_handle(sandbox):
            raise SandboxTerminalError(f"{sandbox!r} is not a sandbox handle.")
        with self.call(doing) as lifecycle:
            return lifecycle.get_sandbox_info(sandbox)

    def renew(self, sandbox: str, *, default_lease: float) -> bool:
        """
        Move the sandbox's expiry to one of its creator's leases from now, unless the server
        already has it later; ``False`` if it is gone. ``default_lease`` serves a sandbox
        whose creator stamped none.
        """
        with self.call(f"renew the lease on sandbox {sandbox}") as lifecycle:
            info = unless_missing(lambda: lifecycle.get_sandbox_info(sandbox))
            lease = renewal(info, default_lease=default_lease)
            if isinstance(lease, timedelta):
                return done_unless_missing(lambda: lifecycle.renew_sandbox(sandbox, lease))
        return lease

    def keep(self, sandbox: str, seconds: float) -> datetime | None:
        """
        Move the sandbox's expiry to ``seconds`` from now, earlier or later than it was, and
        mark it kept until then (:mod:`~opensandbox_provider._kept`); when it goes, or ``None``
        if it is gone.
        """
        with self.call(f"keep sandbox {sandbox}") as lifecycle:
            info = unless_missing(lambda: lifecycle.get_sandbox_info(sandbox))
            if info is None or ended(info):
                return None
            return unless_missing(lambda: _kept.keep(lifecycle, sandbox, seconds))

    def kill(self, sandbox: str) -> bool:
        """
        Destroy ``sandbox`` by handle alone, whatever its state, unhealthy or paused too, as
        every sandbox the package ends is; ``False`` when the server no longer had it.
        """
        with self.call(f"destroy sandbox {sandbox}") as lifecycle:
            done = done_unless_missing(lambda: lifecycle.kill_sandbox(sandbox))
        killed(sandbox, done=done)
        return done

    def _api(self) -> SandboxManagerSync:
        with self._lock:
            if self._client is None:
                from opensandbox.sync.manager import SandboxManagerSync

                client = SandboxManagerSync.create(self._config())
                # Closed with the backend that owns this: when nothing refers to it any more,
                # lease threads included, or when the interpreter exits.
                weakref.finalize(self, client.close)
                self._client = client
            return self._client


def destroy_quietly(destroy: Callable[[str], object], sandbox: str, *, after: str) -> None:
    """
    ``destroy(sandbox)`` while another failure is reported, or a sandbox is set aside, without
    hiding it: a failure to destroy is only logged, since the server ends an unrenewed sandbox
    within one lease anyway.
    """
    try:
        destroy(sandbox)
    except transport_errors():
        log.warning(
            "Could not destroy sandbox %s after %s; the server ends it when its lease runs out.",
            sandbox,
            after,
            exc_info=True,
        )


def ended(info: SandboxInfo) -> bool:
    """Whether the sandbox ``info`` describes can no longer run a command."""
    return info.status.state in ENDED_STATES


def renewal(info: SandboxInfo | None, *, default_lease: float) -> timedelta | bool:
    """
    What renewing the sandbox ``info`` describes comes to: ``False`` when it is gone (``None``)
    or ended, ``True`` when the server already has its expiry later than one of its creator's
    leases from now (``default_lease`` when the creator stamped none), else that lease.
    """
    if info is None or ended(info):
        return False
    lease = _tags.stamped_lease(info.metadata, default=default_lease)
    left = seconds_left(info.expires_at)
    # The server takes any future expiry, so renewing a sandbox whose creator gave it longer,
    # or no expiry at all, would cut its life short.
    return timedelta(seconds=lease) if left is not None and left < lease else True


def unless_missing(call: Callable[[], T]) -> T | None:
    """``call()``, or ``None`` when the server answers 404: what it asked about is gone."""
    try:
        return call()
    except api_exceptions() as e:
        if status_of(e) != 404:
            raise
        return None


def killed(sandbox: str, *, done: bool) -> None:
    """Log a kill: ``done`` when it ended the sandbox, not when the server had it no more."""
    log.info("Destroyed sandbox %s." if done else "Sandbox %s was already gone.", sandbox)


def gone(sdk: SandboxSync) -> bool:
    """Whether the sandbox no longer exists or can no longer run; a failure to ask raises."""
    with as_sandbox_errors(f"check on sandbox {sdk.id}"):
        info = unless_missing(sdk.get_info)
    # A container killed from outside is still listed, as Failed, until it is destroyed.
    return info is None or ended(info)
