"""
No request of the backend, the operator or the trigger goes through a proxy named in the
environment: with every proxy variable pointing at a listener of the test's own, the listener
is never connected to, and the calls reach the server and the sandbox on loopback directly.
"""

from __future__ import annotations

import ast
import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec

import opensandbox_provider
from opensandbox_provider.egress._policy import network_policy, unenforced
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.sandbox.backend import OpenSandboxBackend
from opensandbox_provider.triggers.opensandbox import OpenSandboxCommandTrigger
from tests.unit.egress.test_policy import sidecar_answer
from tests.unit.sandbox_server import Scripted, serving

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
SANDBOX = "/v1/sandboxes/sbx"
INFO = {
    "id": "sbx",
    "status": {"state": "Running"},
    "entrypoint": ["/bin/sh"],
    "createdAt": "2026-01-01T00:00:00Z",
    "metadata": {},
}


class CountingListener:
    """A TCP listener on loopback that counts the connections made to it and closes each."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self._socket.close()


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingListener]:
    listener = CountingListener()
    for name in PROXY_VARIABLES:
        for variable in (name, name.lower()):
            monkeypatch.setenv(variable, f"http://127.0.0.1:{listener.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    yield listener
    listener.close()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Scripted]:
    """The server and sandbox ``sbx`` on loopback, named by the environment as a connection."""
    script = Scripted(
        {
            SANDBOX: [(200, INFO)],
            f"DELETE {SANDBOX}": [(204, b"")],
            "/proxy/18080/policy": [(200, sidecar_answer())],
            "/proxy/44772/command/status/c": [(200, {"id": "c", "running": False, "exit_code": 0})],
            "/proxy/44772/command/c/logs": [
                (200, b"done\n", {"EXECD-COMMANDS-TAIL-CURSOR": "5"}),
            ],
        }
    )
    with serving(script) as port:
        monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", f"127.0.0.1:{port}")
        yield script


def test_the_proxy_variables_would_be_taken_by_a_client_that_trusts_them(proxy, server) -> None:
    # What makes the tests below able to fail: an httpx client left to read the environment
    # sends its request to the listener.
    import httpx

    with pytest.raises(httpx.HTTPError), httpx.Client() as client:
        client.get("http://127.0.0.1:9/")
    assert proxy.connections >= 1


def test_the_backend_reaches_the_server_and_the_sandbox_past_the_proxy(proxy, server) -> None:
    backend = OpenSandboxBackend(None)
    # The sidecar read the proof at create makes, over the reconnected sandbox's services.
    assert unenforced(backend._sandbox("sbx").http, network_policy(SandboxSpec())) is None
    assert backend.read_tags("sbx") == {}
    backend.destroy("sbx")
    assert proxy.connections == 0
    assert {SANDBOX, "/proxy/18080/policy", f"DELETE {SANDBOX}"} <= set(server.asked)


def test_the_operator_back_from_the_trigger_reaches_the_server_past_the_proxy(
    proxy, server
) -> None:
    operator = OpenSandboxOperator(task_id="t", command="true", opensandbox_conn_id=None)
    event = {"status": "ended", "sandbox": "sbx", "exit_code": 0, "stdout": "ok\n", "stderr": ""}
    assert operator.execute_complete({}, {**event, "timed_out": False}) == {
        "exit_code": 0,
        "stdout": "ok\n",
    }
    assert proxy.connections == 0
    assert f"DELETE {SANDBOX}" in server.asked


def test_the_trigger_polls_execd_past_the_proxy(proxy, server) -> None:
    trigger = OpenSandboxCommandTrigger(
        sandbox="sbx",
        command_id="c",
        opensandbox_conn_id=None,
        command_timeout=60.0,
        sandbox_timeout=600.0,
        poll_interval=0.01,
    )

    async def first_event() -> dict:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger fired no event")

    event = asyncio.run(first_event())
    assert (event["status"], event["exit_code"], event["stdout"]) == ("ended", 0, "done\n")
    assert proxy.connections == 0
    assert "/proxy/44772/command/status/c" in server.asked


def test_every_http_client_of_the_package_is_built_in_one_module() -> None:
    package = Path(opensandbox_provider.__file__).parent
    built_elsewhere = [
        f"{module.relative_to(package)}:{node.lineno}"
        for module in sorted(package.rglob("*.py"))
        if module.name != "_clients.py"
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("Client", "AsyncClient")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "httpx"
    ]
    assert built_elsewhere == [], (
        "Build HTTP clients with opensandbox_provider._clients, which keeps them from taking a "
        f"proxy from the environment: {built_elsewhere}"
    )
