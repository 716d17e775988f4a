"""
What the backend asks of a place it takes ready sandboxes from instead of creating them.

A warm pool and a server pool (:mod:`opensandbox_provider.pool`) are such places. They are
built on the backend (a draw reads the creation template, the server's lifecycle client, the
create's request timeout), so the backend names only this protocol and the pool package
implements it: the sandbox package never imports the pools, as Kubernetes' pod operator
depends on a hook protocol rather than on the hook.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

if TYPE_CHECKING:
    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync

    from opensandbox_provider._metrics import Route
    from opensandbox_provider.sandbox._lifecycle import Lifecycle
    from opensandbox_provider.sandbox._template import CreationTemplate


class SandboxSource(Protocol):
    """A pool a backend takes each sandbox from, ready, instead of creating it."""

    @property
    def route(self) -> Route:
        """The route a sandbox taken from it came by, as its creation's metric is named."""
        ...

    def check_backend(self, *, snapshot: str | None, has_volumes: bool) -> None:
        """Refuse, when the Dag is parsed, backend arguments the pool can never serve."""
        ...

    def take(
        self, template: CreationTemplate, *, lifecycle: Lifecycle, config: ConnectionConfigSync
    ) -> SandboxSync | None:
        """
        A sandbox made as ``template`` says, stamped with its metadata and lease; ``None`` when
        the backend is to create one as without the pool. Raises when the pool says to fail.
        """
        ...

    def origin(self, template: CreationTemplate) -> tuple[str, str]:
        """How the log says a sandbox taken from it was had, and of what."""
        ...

    def unenforced(self, error: SandboxTerminalError) -> SandboxTerminalError | None:
        """
        ``error``, a failed egress proof of a sandbox taken from it, with what the pool must
        have for the proof to pass; ``None`` when the pool has nothing to add.
        """
        ...


@contextmanager
def advising(drawn: SandboxSource | None) -> Iterator[None]:
    """Add to a failed egress proof what the pool the sandbox came from must have, if anything."""
    try:
        yield
    except SandboxTerminalError as e:
        advised = None if drawn is None else drawn.unenforced(e)
        if advised is None:
            raise
        raise advised from e
