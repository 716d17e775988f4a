"""OpenSandboxHook: an Airflow connection, given as AIRFLOW_CONN_* JSON, as the SDK's config."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from opensandbox_provider.hooks.opensandbox import InvalidConnectionError, OpenSandboxHook

API_KEY = "test-key-that-must-never-be-shown"


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch):
    """Define connection ``conn_id`` the way a deployment's environment does."""

    def define(conn_id: str = "opensandbox_default", **fields: object) -> str:
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "opensandbox", **fields})
        )
        return conn_id

    return define


def test_a_connection_becomes_the_sdks_connection_config(connection) -> None:
    connection(
        host="sandboxes.internal",
        port=8443,
        schema="https",
        password=API_KEY,
        extra={"request_timeout": "12.5", "use_server_proxy": "false"},
    )
    config = OpenSandboxHook().connection_config
    assert config.domain == "sandboxes.internal:8443"
    assert config.protocol == "https"
    assert config.api_key == API_KEY
    assert config.request_timeout == timedelta(seconds=12.5)
    assert config.use_server_proxy is False
    # Each sandbox built on it gets a transport of its own, closed with the sandbox.
    assert config.transport is None


def test_an_unset_schema_timeout_and_proxy_take_the_defaults(connection) -> None:
    connection(host="sandboxes.internal")
    config = OpenSandboxHook().connection_config
    assert (config.domain, config.protocol, config.api_key) == ("sandboxes.internal", "http", None)
    assert config.request_timeout == timedelta(seconds=30)
    assert config.use_server_proxy is True


def test_common_ais_generic_connection_shape_works_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    generic = {
        "conn_type": "generic",
        "host": "h",
        "port": 18090,
        "password": API_KEY,
        "extra": {"request_timeout": 5, "use_server_proxy": True},
    }
    monkeypatch.setenv("AIRFLOW_CONN_SHARED", json.dumps(generic))
    config = OpenSandboxHook("shared").connection_config
    assert (config.domain, config.request_timeout, config.use_server_proxy) == (
        "h:18090",
        timedelta(seconds=5),
        True,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("False", False),
        ("1", True),
        ("no", False),
        ("", True),
        (None, True),
    ],
)
def test_use_server_proxy_takes_booleans_and_their_string_forms(
    connection, value, expected
) -> None:
    connection(host="h", extra={"use_server_proxy": value})
    assert OpenSandboxHook().connection_config.use_server_proxy is expected


def test_the_backends_use_server_proxy_overrides_the_connection(connection) -> None:
    connection(host="h", extra={"use_server_proxy": True})
    assert OpenSandboxHook(use_server_proxy=False).connection_config.use_server_proxy is False


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"use_server_proxy": "***"}, "use_server_proxy"),  # what a masked form default saves
        ({"use_server_proxy": "maybe"}, "use_server_proxy"),
        ({"request_timeout": "soon"}, "request_timeout"),
        ({"request_timeout": 0}, "request_timeout"),
        ({"request_timeout": -3}, "request_timeout"),
        ({"request_timeout": True}, "request_timeout"),
    ],
)
def test_an_unusable_extra_is_refused_with_its_name(connection, extra, named) -> None:
    connection(host="h", extra=extra)
    with pytest.raises(InvalidConnectionError, match=named):
        OpenSandboxHook().get_conn()


def test_a_connection_without_a_host_is_refused_rather_than_pointed_at_localhost(
    connection,
) -> None:
    connection(password=API_KEY)
    with pytest.raises(InvalidConnectionError, match="has no host"):
        OpenSandboxHook().get_conn()


@pytest.mark.parametrize("host", ["https://sandboxes.internal", "sandboxes.internal/v1"])
def test_a_host_with_a_scheme_or_path_is_refused(connection, host: str) -> None:
    connection(host=host)
    with pytest.raises(InvalidConnectionError, match="bare host name"):
        OpenSandboxHook().get_conn()


def test_a_schema_other_than_http_or_https_is_refused(connection) -> None:
    connection(host="h", schema="ftp")
    with pytest.raises(InvalidConnectionError, match="http or https"):
        OpenSandboxHook().get_conn()


def test_an_ipv6_host_is_bracketed_before_its_port(connection) -> None:
    connection(host="fd00::1", port=8080)
    assert OpenSandboxHook().connection_config.domain == "[fd00::1]:8080"


def test_without_a_connection_id_the_sdks_environment_variables_name_the_server(
    monkeypatch,
) -> None:
    monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", "https://sandboxes.internal:9443/")
    monkeypatch.setenv("OPEN_SANDBOX_API_KEY", API_KEY)
    config = OpenSandboxHook(None).connection_config
    assert (config.domain, config.protocol, config.api_key) == (
        "sandboxes.internal:9443",
        "https",
        API_KEY,
    )
    assert config.use_server_proxy is True


def test_without_a_connection_id_or_a_domain_nothing_is_guessed(monkeypatch) -> None:
    monkeypatch.delenv("OPEN_SANDBOX_DOMAIN", raising=False)
    with pytest.raises(InvalidConnectionError, match="OPEN_SANDBOX_DOMAIN is not set"):
        OpenSandboxHook(None).get_conn()


def test_constructing_the_hook_reads_nothing() -> None:
    hook = OpenSandboxHook("no_such_connection_anywhere")
    assert hook.opensandbox_conn_id == "no_such_connection_anywhere"


@pytest.fixture
def not_opensandbox() -> Iterator[int]:
    """Something on loopback that answers HTTP, but not as an OpenSandbox server."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            body = b"<html>Not Found</html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_connection_test_says_when_nothing_answers(connection) -> None:
    connection(host="127.0.0.1", port=closed_port(), password=API_KEY)
    ok, message = OpenSandboxHook().test_connection()
    assert not ok
    assert message.startswith("Could not reach an OpenSandbox server at http://127.0.0.1:")
    assert API_KEY not in message


def test_the_connection_test_says_when_something_else_answers(connection, not_opensandbox) -> None:
    connection(host="127.0.0.1", port=not_opensandbox, password=API_KEY)
    ok, message = OpenSandboxHook().test_connection()
    assert not ok
    assert "but not as an OpenSandbox lifecycle API (HTTP 404)" in message
    assert API_KEY not in message


def test_the_connection_test_says_when_tls_fails(connection, not_opensandbox) -> None:
    connection(host="127.0.0.1", port=not_opensandbox, schema="https", password=API_KEY)
    ok, message = OpenSandboxHook().test_connection()
    assert not ok
    assert message.startswith("The TLS handshake with https://127.0.0.1:")
    assert API_KEY not in message


def test_the_connection_test_says_what_is_wrong_with_the_connection(connection) -> None:
    connection(password=API_KEY)
    ok, message = OpenSandboxHook().test_connection()
    assert (ok, "has no host" in message) == (False, True)
