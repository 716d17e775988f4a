"""OpenSandboxHook: an Airflow connection, given as AIRFLOW_CONN_* JSON or URI, as the SDK's
config."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable, Iterator
from datetime import timedelta

import httpx
import pytest

from opensandbox_provider._exchange import SOCKET_BODY
from opensandbox_provider._transport import OWN_CONNECTION
from opensandbox_provider.hooks.opensandbox import InvalidConnectionError, OpenSandboxHook
from tests.unit.airflow_versions import (
    DEFAULT_SENSITIVE_FIELDS,
    SecretsMasker,
    forget_masked_values,
    hides_values_of,
    task_masker,
)
from tests.unit.loopback_http import answering_every_get
from tests.unit.tls import EMPTY_LISTING, PrivateAuthority, https_lifecycle_api, make_authority

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


def test_the_triggerers_async_config_reads_the_connection_as_the_workers_does(
    connection, tmp_path
) -> None:
    authority = make_authority(tmp_path)
    connection(
        host="sandboxes.internal",
        port=8443,
        schema="https",
        password=API_KEY,
        extra={
            "request_timeout": "12.5",
            "route_through_server": "false",
            "ca_bundle": str(authority.ca_pem),
            "cpu_request": "250m",
        },
    )
    hook = OpenSandboxHook()
    config = asyncio.run(hook.async_connection_config())
    sync = hook.connection_config
    for field in ("domain", "protocol", "api_key", "request_timeout", "use_server_proxy"):
        assert getattr(config, field) == getattr(sync, field), field
    assert config.ca_certificates == sync.ca_certificates == authority.ca_pem.read_text()
    # A transport the SDK does not own: a failed connect or a closed manager leaves it to the
    # trigger, whose other calls share it. The SDK owns only a transport it was not given
    # (1.1.1 says so as owns_transport; 1.1.0 decides the same from the fields set).
    assert config.transport is not None and "transport" in config.model_fields_set
    # One TLS context for every async client of the process that trusts the same authorities.
    assert config.ssl_context() is asyncio.run(hook.async_connection_config()).ssl_context()
    asyncio.run(config.transport.aclose())


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
    with answering_every_get(404, "text/html", b"<html>Not Found</html>") as port:
        yield port


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


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("sandboxes.internal:8443", "sandboxes.internal:8443"),
        ("10.0.0.7:8080", "10.0.0.7:8080"),
        ("[fd00::1]:8080", "[fd00::1]:8080"),
        ("[fd00::1]", "[fd00::1]"),
    ],
)
def test_a_port_written_into_the_host_is_taken_when_the_port_field_is_empty(
    connection, host: str, domain: str
) -> None:
    connection(host=host)
    assert OpenSandboxHook().connection_config.domain == domain


def test_a_port_in_the_host_that_agrees_with_the_port_field_is_used_once(connection) -> None:
    connection(host="sandboxes.internal:8443", port=8443)
    assert OpenSandboxHook().connection_config.domain == "sandboxes.internal:8443"


@pytest.mark.parametrize("host", ["sandboxes.internal:8443", "[fd00::1]:8443"])
def test_a_port_in_the_host_that_differs_from_the_port_field_is_refused(
    connection, host: str
) -> None:
    connection(host=host, port=9443)
    with pytest.raises(InvalidConnectionError, match="8443 in its host .* but 9443 in its Port"):
        OpenSandboxHook().get_conn()


@pytest.mark.parametrize(
    "host",
    [
        "sandboxes.internal:",
        "sandboxes.internal:https",
        "h:70000",
        "[fd00::1",
        "[::1]x",
        "[]:8080",
        "[sandboxes.internal]:8080",
        "sandboxes::internal",
    ],
)
def test_a_host_with_something_other_than_a_port_after_it_says_to_use_the_port_field(
    connection, host: str
) -> None:
    connection(host=host)
    with pytest.raises(InvalidConnectionError, match="Port field"):
        OpenSandboxHook().get_conn()


def test_the_connection_test_names_the_real_fault_behind_a_host_with_a_port(
    connection, not_opensandbox
) -> None:
    port = closed_port()
    connection(host=f"127.0.0.1:{port}", password=API_KEY)
    ok, message = OpenSandboxHook().test_connection()
    assert not ok
    assert message.startswith(f"Could not reach an OpenSandbox server at http://127.0.0.1:{port} (")

    connection(host=f"127.0.0.1:{not_opensandbox}", password=API_KEY)
    ok, message = OpenSandboxHook().test_connection()
    assert not ok
    assert f"at http://127.0.0.1:{not_opensandbox}, but not as an OpenSandbox lifecycle API" in (
        message
    )


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> PrivateAuthority:
    return make_authority(tmp_path_factory.mktemp("private-ca"))


@pytest.fixture
def private_tls_server(authority: PrivateAuthority) -> Iterator[int]:
    with https_lifecycle_api(authority) as port:
        yield port


@pytest.fixture
def private_tls_connection(connection, authority, private_tls_server) -> Callable[..., None]:
    """Define the default connection to the private TLS server, naming its authority in the
    ca_bundle extra unless ``trusting`` is False."""

    def define(*, trusting: bool = True, **fields: object) -> None:
        if trusting:
            fields["extra"] = {"ca_bundle": str(authority.ca_pem)}
        connection(host="127.0.0.1", port=private_tls_server, schema="https", **fields)

    return define


def test_the_connection_test_trusts_the_authority_the_ca_bundle_names(
    private_tls_connection, private_tls_server
) -> None:
    private_tls_connection(password=API_KEY)
    assert OpenSandboxHook().test_connection() == (
        True,
        f"Connected to the OpenSandbox server at https://127.0.0.1:{private_tls_server}; "
        "it accepted the API key.",
    )


def test_the_transport_a_sandbox_gets_trusts_the_ca_bundle_too(
    private_tls_connection, private_tls_server
) -> None:
    # The backend's own requests to a sandbox's services go over the sandbox's SDK
    # transport, without the retry wrapper; this is that client.
    from opensandbox.transport import unwrap_retry_transport

    private_tls_connection()
    config = OpenSandboxHook().connection_config.with_transport_if_missing()
    url = f"https://127.0.0.1:{private_tls_server}/v1/sandboxes"
    try:
        client = httpx.Client(transport=unwrap_retry_transport(config.transport))
        response = client.get(url)
        # A command's stream and a download go on a connection of their own, with the same trust.
        own = client.get(url, extensions={OWN_CONNECTION: True})
    finally:
        config.close_transport_if_owned()
    assert response.json() == EMPTY_LISTING
    assert own.extensions.get(SOCKET_BODY) is not None
    assert own.json() == EMPTY_LISTING


def test_without_the_ca_bundle_the_connection_test_says_tls_failed_and_names_the_extra(
    private_tls_connection, private_tls_server
) -> None:
    private_tls_connection(trusting=False, password=API_KEY)
    ok, message = OpenSandboxHook().test_connection()
    assert not ok
    assert message.startswith(f"The TLS handshake with https://127.0.0.1:{private_tls_server} ")
    assert "certificate verify failed" in message
    assert "ca_bundle extra" in message
    assert API_KEY not in message


@pytest.mark.parametrize(
    ("contents", "refusal"),
    [
        (None, "cannot be read"),
        ("a directory", "cannot be read"),
        ("", "holds no certificate in PEM form"),
        ("not a certificate\n", "holds no certificate in PEM form"),
        (b"\x30\x82\xff\xfe", "holds no certificate in PEM form"),
    ],
)
def test_a_ca_bundle_that_cannot_be_used_is_refused_naming_the_extra(
    connection, tmp_path, contents, refusal
) -> None:
    bundle = tmp_path / "ca.pem"
    if contents == "a directory":
        bundle.mkdir()
    elif isinstance(contents, bytes):
        bundle.write_bytes(contents)
    elif contents is not None:
        bundle.write_text(contents)
    connection(host="h", schema="https", extra={"ca_bundle": str(bundle)})
    with pytest.raises(InvalidConnectionError, match="ca_bundle extra") as refused:
        OpenSandboxHook().get_conn()
    assert refusal in str(refused.value)
    ok, message = OpenSandboxHook().test_connection()
    assert (ok, "ca_bundle extra" in message) == (False, True)


@pytest.fixture
def masker() -> Iterator[SecretsMasker]:
    """Airflow's own log masker, as a task's is set up; what a test adds to it is taken back."""
    if "proxy" not in DEFAULT_SENSITIVE_FIELDS:
        pytest.skip("This Airflow (3.0) does not mask the values of extras named *proxy*.")
    masker = task_masker()
    # Importing Airflow configures it from [core] sensitive_var_conn_names, as in a task.
    assert hides_values_of(masker, "use_server_proxy")
    patterns, replacer = masker.patterns, masker.replacer
    # Other tests' connections have added their own values; start from none.
    forget_masked_values(masker)
    yield masker
    masker.patterns, masker.replacer = patterns, replacer


def define_uri(monkeypatch: pytest.MonkeyPatch, uri: str) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_OPENSANDBOX_DEFAULT", uri)


def test_route_through_server_false_in_a_uri_switches_the_proxy_off_and_masks_nothing(
    monkeypatch, masker
) -> None:
    define_uri(monkeypatch, "opensandbox://sandboxes.internal:8080?route_through_server=false")
    assert OpenSandboxHook().connection_config.use_server_proxy is False
    assert masker.redact("the value is false") == "the value is false"


def test_use_server_proxy_as_a_json_boolean_masks_nothing(connection, masker) -> None:
    connection(host="sandboxes.internal", extra={"use_server_proxy": False})
    assert OpenSandboxHook().connection_config.use_server_proxy is False
    assert masker.redact("the value is false") == "the value is false"


def test_airflow_masks_use_server_proxy_false_as_a_string_which_route_through_server_avoids(
    monkeypatch, masker
) -> None:
    # Airflow's doing, on loading the connection, before any hook reads it: should it stop,
    # route_through_server is no longer needed.
    define_uri(monkeypatch, "opensandbox://sandboxes.internal:8080?use_server_proxy=false")
    assert OpenSandboxHook().connection_config.use_server_proxy is False
    assert masker.redact("the value is false") == "the value is ***"


def test_route_through_server_and_use_server_proxy_that_disagree_are_refused(connection) -> None:
    connection(host="h", extra={"use_server_proxy": True, "route_through_server": "false"})
    with pytest.raises(InvalidConnectionError, match="Keep one of them"):
        OpenSandboxHook().get_conn()


def test_route_through_server_overrides_nothing_when_it_agrees(connection) -> None:
    connection(host="h", extra={"use_server_proxy": False, "route_through_server": "off"})
    assert OpenSandboxHook().connection_config.use_server_proxy is False
