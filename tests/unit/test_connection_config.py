"""The connection's resource requests: what each sandbox asks a Kubernetes scheduler for."""

from __future__ import annotations

import json

import pytest
from opensandbox.config.connection_sync import ConnectionConfigSync

from opensandbox_provider import _connection_config
from opensandbox_provider._connection_config import creation_options
from opensandbox_provider.hooks.opensandbox import InvalidConnectionError, OpenSandboxHook


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch):
    def define(**extra: object) -> OpenSandboxHook:
        fields = {"conn_type": "opensandbox", "host": "sandboxes.internal", "extra": extra}
        monkeypatch.setenv("AIRFLOW_CONN_OPENSANDBOX_DEFAULT", json.dumps(fields))
        return OpenSandboxHook()

    return define


def test_the_request_extras_become_the_creates_resource_requests(connection) -> None:
    config = connection(cpu_request=" 250m ", memory_request="256Mi").connection_config

    assert config.resource_requests == {"cpu": "250m", "memory": "256Mi"}
    assert creation_options(config) == {"resource_requests": {"cpu": "250m", "memory": "256Mi"}}


def test_one_request_alone_is_sent_alone(connection) -> None:
    # An empty field and one the form saved as null are both unset.
    config = connection(memory_request="1Gi", cpu_request="").connection_config
    assert connection(cpu_request=None).connection_config.resource_requests is None

    assert creation_options(config) == {"resource_requests": {"memory": "1Gi"}}


def test_without_requests_the_create_sends_none_and_the_limits_stand_for_them(connection) -> None:
    config = connection().connection_config

    assert config.resource_requests is None
    assert creation_options(config) == {}
    # A config built without the hook (the SDK's own) adds nothing either.
    assert creation_options(ConnectionConfigSync(domain="h:1")) == {}


@pytest.mark.parametrize(
    ("extra", "value"),
    [("cpu_request", "2 cores"), ("memory_request", 512), ("cpu_request", "   ")],
)
def test_a_request_that_is_not_a_quantity_is_refused_with_its_extras_name(
    connection, extra: str, value: object
) -> None:
    with pytest.raises(InvalidConnectionError) as raised:
        connection(**{extra: value}).get_conn()

    message = str(raised.value)
    assert f"The {extra} extra of connection 'opensandbox_default' is {value!r}" in message
    assert "Kubernetes quantity" in message


def test_an_sdk_that_cannot_send_requests_refuses_the_connection_rather_than_dropping_them(
    connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_connection_config, "SDK_TAKES_REQUESTS", False)

    with pytest.raises(InvalidConnectionError, match="cannot send"):
        connection(cpu_request="250m").get_conn()
    # A connection without requests is unaffected.
    assert connection().connection_config.resource_requests is None
