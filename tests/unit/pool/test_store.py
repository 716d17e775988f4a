"""A warm pool's Redis connection: ``ssl`` read as the boolean it says, and TLS to a Redis whose
certificate an authority of one's own signed, trusted through ``ssl_ca_certs``."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from opensandbox_provider.hooks.opensandbox import InvalidConnectionError
from opensandbox_provider.pool._store import _client
from tests.unit.tls import PrivateAuthority, make_authority

CONN_ID = "pool_redis"


def define(monkeypatch: pytest.MonkeyPatch, port: int = 6379, **extra: object) -> None:
    connection = {"conn_type": "redis", "host": "127.0.0.1", "port": port, "extra": extra}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(connection))


@pytest.mark.parametrize(
    ("ssl", "tls"),
    [
        ("false", False),
        ("False", False),
        ("0", False),
        ("", False),
        (False, False),
        ("true", True),
        ("1", True),
        (True, True),
    ],
)
def test_the_ssl_extra_is_the_boolean_it_says_text_false_included(monkeypatch, ssl, tls) -> None:
    define(monkeypatch, ssl=ssl)
    assert _uses_tls(_client(CONN_ID)) is tls


def _uses_tls(client) -> bool:
    from redis.connection import SSLConnection

    return issubclass(client.connection_pool.connection_class, SSLConnection)


@pytest.mark.parametrize("ssl", ["maybe", "yes please", 2, ["true"]])
def test_an_ssl_extra_that_is_no_boolean_is_refused_saying_what_to_set(monkeypatch, ssl) -> None:
    define(monkeypatch, ssl=ssl)
    with pytest.raises(InvalidConnectionError, match="ssl extra .* set it to true or false"):
        _client(CONN_ID)


def test_an_authority_to_trust_without_tls_is_refused(monkeypatch, tmp_path) -> None:
    authority = make_authority(tmp_path)
    define(monkeypatch, ssl="false", ssl_ca_certs=str(authority.ca_pem))
    with pytest.raises(InvalidConnectionError, match="set ssl to true, or drop ssl_ca_certs"):
        _client(CONN_ID)


def test_an_authority_file_that_holds_no_certificate_is_refused(monkeypatch, tmp_path) -> None:
    (tmp_path / "empty.pem").write_text("")
    define(monkeypatch, ssl=True, ssl_ca_certs=str(tmp_path / "empty.pem"))
    with pytest.raises(InvalidConnectionError, match="ssl_ca_certs extra .* holds no certificate"):
        _client(CONN_ID)


@pytest.fixture
def tls_redis(tmp_path) -> Iterator[tuple[int, PrivateAuthority]]:
    """A Redis of this test's own on loopback, speaking TLS only, its certificate signed by a
    private authority."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed; make setup-stack installs it.")
    authority = make_authority(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [
        "redis-server",
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(authority.server_cert_pem),
        "--tls-key-file",
        str(authority.server_key_pem),
        "--tls-ca-cert-file",
        str(authority.ca_pem),
        "--tls-auth-clients",
        "no",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(tmp_path),
    ]
    with (tmp_path / "redis.log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert process.poll() is None, Path(tmp_path / "redis.log").read_text()
                    assert time.monotonic() < deadline, "the TLS Redis did not start"
                    time.sleep(0.05)
            yield port, authority
        finally:
            process.terminate()
            process.wait(timeout=10)


def test_a_redis_behind_a_private_authority_is_reached_through_ssl_ca_certs(
    monkeypatch, tls_redis
) -> None:
    port, authority = tls_redis
    define(monkeypatch, port=port, ssl="true", ssl_ca_certs=str(authority.ca_pem))
    assert _client(CONN_ID).ping() is True


def test_without_ssl_ca_certs_a_redis_behind_a_private_authority_is_refused(
    monkeypatch, tls_redis
) -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    port, _ = tls_redis
    define(monkeypatch, port=port, ssl="true")
    with pytest.raises(RedisConnectionError, match="certificate verify failed"):
        _client(CONN_ID).ping()
