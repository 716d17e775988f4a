"""What the connection form's Test button answers, against the stack's real server."""

from __future__ import annotations

import json

import pytest

from dev.stack.state import ServerInfo
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook


def _test_button(
    monkeypatch: pytest.MonkeyPatch, server: ServerInfo, api_key: str
) -> tuple[bool, str]:
    connection = {
        "conn_type": "opensandbox",
        "host": server.host,
        "port": server.port,
        "schema": "http",
        "password": api_key,
    }
    monkeypatch.setenv("AIRFLOW_CONN_OPENSANDBOX_DEFAULT", json.dumps(connection))
    return OpenSandboxHook().test_connection()


def test_the_test_button_passes_with_the_servers_api_key(
    monkeypatch: pytest.MonkeyPatch, plain_server: ServerInfo
) -> None:
    ok, message = _test_button(monkeypatch, plain_server, plain_server.api_key)
    assert ok, message
    assert message.endswith("it accepted the API key.")


def test_the_test_button_says_the_server_refused_a_wrong_api_key(
    monkeypatch: pytest.MonkeyPatch, plain_server: ServerInfo
) -> None:
    ok, message = _test_button(monkeypatch, plain_server, "not-the-key")
    assert not ok
    assert "refused the API key (HTTP 401" in message
    assert "not-the-key" not in message
