"""What the backend keeps about one sandbox it created or reconnected to, by handle."""

from __future__ import annotations

import math
import posixpath
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from opensandbox_provider import _tags
from opensandbox_provider.execd._execd import Execd
from opensandbox_provider.execd._http import SandboxHttp

if TYPE_CHECKING:
    from opensandbox import SandboxSync
    from opensandbox.models.sandboxes import SandboxInfo


@dataclass
class SandboxRecord:
    """One sandbox: the SDK's handle on it, its services, when it ends and where it works."""

    sdk: SandboxSync
    # When the server will end the sandbox, on the time.monotonic clock; None if never.
    expires_at: float | None
    # Seconds each renewal gives it: its creator's choice, whichever backend holds it.
    lease: float
    # Where commands run and relative paths resolve; None for execd's own directory.
    workdir: str | None = None
    # The sandbox's own services: the egress sidecar is read through http, execd through execd.
    http: SandboxHttp = field(init=False)
    execd: Execd = field(init=False)

    def __post_init__(self) -> None:
        self.http = SandboxHttp(self.sdk)
        self.execd = Execd(self.sdk, self.http)

    @classmethod
    def reconnected(
        cls, sdk: SandboxSync, info: SandboxInfo, *, lease: float, workdir: str | None
    ) -> SandboxRecord:
        """
        A sandbox found again by its handle, as its creator stamped it; ``lease`` and
        ``workdir`` stand where it stamped none.
        """
        return cls(
            sdk,
            expires_at=monotonic_expiry(info.expires_at),
            lease=_tags.stamped_lease(info.metadata, default=lease),
            workdir=_tags.stamped_workdir(info.metadata, default=workdir),
        )

    def resolve(self, path: str) -> str:
        """``path`` as the sandbox's shell reads it: relative to the working directory."""
        # execd expands a leading ~ or $VAR itself, so those are anchored already.
        if self.workdir is None or posixpath.isabs(path) or path.startswith(("~", "$")):
            return path
        return posixpath.normpath(posixpath.join(self.workdir, path))

    def fit_to_lifetime(self, timeout: float) -> float:
        """``timeout``, or what is left of the sandbox's lifetime if that is shorter."""
        # A command cannot outlive its sandbox; one that would is given what is left, and
        # the result says so, rather than being cut off by the sandbox's end.
        if self.expires_at is None:
            return timeout
        return min(timeout, max(1.0, self.expires_at - time.monotonic()))


def seconds_left(expires_at: datetime | None) -> float | None:
    """How long until the server's expiry, or ``None`` when it sets none."""
    if expires_at is None:
        return None
    if expires_at.tzinfo is None:
        expires_at = expires_at.replace(tzinfo=UTC)
    left = (expires_at - datetime.now(UTC)).total_seconds()
    return left if math.isfinite(left) else None


def monotonic_expiry(expires_at: datetime | None) -> float | None:
    """The server's expiry on the ``time.monotonic`` clock, which a clock change cannot move."""
    left = seconds_left(expires_at)
    return None if left is None else time.monotonic() + left
