"""The stack's Redis part, run on a port and in directories of the test's own, never the shared
stack's: `up` starts it only when it is not running, and `down` stops the one it recorded."""

from __future__ import annotations

import socket

import pytest

from dev.stack import processes, redis


@pytest.fixture
def own_redis(tmp_path, monkeypatch: pytest.MonkeyPatch) -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A process table of the test's own, so that a running stack's Redis is never found.
    table = processes.ProcessTable(tmp_path / "run", tmp_path / "logs")
    for name in ("start", "find", "stop", "log_file"):
        monkeypatch.setattr(processes, name, getattr(table, name))
    monkeypatch.setattr(redis, "PORT", port)
    monkeypatch.setattr(redis, "DATA_DIR", tmp_path / "redis")
    # A second loopback address stands for the bridge, which a test does not bind.
    monkeypatch.setattr(redis, "BRIDGE_IP", "127.0.0.2")
    yield port
    redis.stop_redis()


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def test_up_starts_redis_once_on_loopback_and_the_bridge_and_down_stops_it(own_redis) -> None:
    assert redis.ensure_redis() is True
    assert _answers("127.0.0.1", own_redis) and _answers("127.0.0.2", own_redis)
    pid = processes.find(redis.PROCESS_NAME).pid

    # A running stack's `up` leaves it as it is.
    assert redis.ensure_redis() is False
    assert processes.find(redis.PROCESS_NAME).pid == pid

    assert redis.stop_redis() is True
    assert not _answers("127.0.0.1", own_redis)
    assert processes.find(redis.PROCESS_NAME) is None


def test_redis_is_not_bound_to_any_other_address(own_redis) -> None:
    redis.ensure_redis()
    assert not _answers("127.0.0.3", own_redis)


def test_the_private_redis_of_a_test_run_answers_until_its_block_ends(tmp_path) -> None:
    with redis.private(tmp_path) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert _answers("127.0.0.1", port)
    assert not _answers("127.0.0.1", port)
