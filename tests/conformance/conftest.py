"""Fixtures of the conformance suite: sandboxes on the plain server, and a raw view of execd.

Every sandbox made here is destroyed when its test ends, whatever the test did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from opensandbox import SandboxSync
from opensandbox.exceptions import SandboxApiException

from dev.stack.state import ServerInfo, StackState
from tests.conformance.wire import ExecdWire


@pytest.fixture
def make_sandbox(
    stack: StackState, plain_server: ServerInfo
) -> Iterator[Callable[..., SandboxSync]]:
    """Creates sandboxes of the stack's image on the plain server; all are destroyed afterwards."""
    created: list[SandboxSync] = []

    def make(use_server_proxy: bool = False, **options) -> SandboxSync:
        config = plain_server.connection_config(use_server_proxy=use_server_proxy)
        sandbox = SandboxSync.create(stack.sandbox_image, connection_config=config, **options)
        created.append(sandbox)
        return sandbox

    try:
        yield make
    finally:
        for sandbox in created:
            _destroy(sandbox)


def _destroy(sandbox: SandboxSync) -> None:
    try:
        sandbox.destroy()
    except SandboxApiException as error:
        if error.status_code != 404:
            raise
    finally:
        sandbox.close()


@pytest.fixture
def sandbox(make_sandbox: Callable[..., SandboxSync]) -> SandboxSync:
    return make_sandbox()


@pytest.fixture
def wire(sandbox: SandboxSync) -> Iterator[ExecdWire]:
    """execd of `sandbox`, reached over raw HTTP at the endpoint the SDK resolves."""
    with ExecdWire.of(sandbox) as opened:
        yield opened
