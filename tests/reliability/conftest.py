"""Fixtures of the reliability suite: backends on the stack, a server of its own, and the checks
every case repeats (no container left, no API key in any log line or error)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
from airflow.providers.common.ai.sandbox import SandboxSpec

from dev.stack.state import ServerInfo, StackState
from tests.own_server import RELIABILITY, OwnServer, running_own_server
from tests.reliability.cleanup import destroy_directly
from tests.reliability.faultproxy import FaultProxy

# Open egress, so the plain server (no sidecar) can provision it; egress is not what this suite
# is about.
OPEN = SandboxSpec(block_network=False)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """An error and everything it was raised from or during, each once (a chain can loop)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__]


def assert_key_hidden(key: str, caplog: pytest.LogCaptureFixture, *errors: BaseException) -> None:
    """The API key is in no captured log line (tracebacks included) and in no error's text."""
    formatter = logging.Formatter()
    for record in caplog.records:
        text = record.getMessage()
        if record.exc_info:
            text += formatter.formatException(record.exc_info)
        assert key not in text, f"the API key appears in a log line of {record.name}: {text[:300]}"
    for error in errors:
        for link in _chain(error):
            assert key not in str(link), f"the API key appears in a {type(link).__name__}"
            assert key not in repr(link.args), f"the API key is in a {type(link).__name__}'s args"


@pytest.fixture(autouse=True)
def capture_everything(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)


@pytest.fixture
def make_backend(monkeypatch: pytest.MonkeyPatch, stack: StackState) -> Callable[..., object]:
    """A backend reading a connection to ``server``, as a Dag's backend reads its connection."""
    from opensandbox_provider.sandbox import OpenSandboxBackend

    def make(server: ServerInfo, conn_id: str = "reliability", **extra: object):
        for variable, value in server.airflow_connection_env(conn_id, **extra).items():
            monkeypatch.setenv(variable, value)
        return OpenSandboxBackend(conn_id, image=stack.sandbox_image)

    return make


@pytest.fixture
def sandboxes(plain_server: ServerInfo) -> Iterator[list[str]]:
    """Sandbox ids a test made; any still standing at the end is destroyed through the SDK."""
    made: list[str] = []
    yield made
    destroy_directly(plain_server, made)


@pytest.fixture(scope="session")
def own_server(stack: StackState) -> Iterator[OwnServer]:
    """A server only this suite uses, so killing or re-keying it disturbs no other test."""
    with running_own_server(RELIABILITY, stack) as server:
        yield server


@pytest.fixture
def fault_proxy(plain_server: ServerInfo) -> Iterator[FaultProxy]:
    proxy = FaultProxy(plain_server.host, plain_server.port)
    proxy.start()
    yield proxy
    proxy.stop()
