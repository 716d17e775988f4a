"""Warm pools on the stack's servers: a keeper fills a pool in Redis, backends draw from it.

Each test's pools live in a Redis of the run's own (dev/stack/redis.py) under a name of their
own, and are drained when the test ends.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from opensandbox.sync.manager import SandboxManagerSync

from dev.stack import redis
from dev.stack.state import ServerInfo
from opensandbox_provider.pool import Keeper, WarmPool, drain
from opensandbox_provider.pool._definition import FINGERPRINT_KEY, POOL_KEY
from opensandbox_provider.pool._store import state_store
from opensandbox_provider.sandbox import OpenSandboxBackend
from tests import warm_pools
from tests.secret_traces import giving_away
from tests.sent_metrics import recording

CONN_ID = "opensandbox_default"
DEPLOYMENT_OPTION = "AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID"
OPEN = SandboxSpec(block_network=False)
# A keeper of these tests gives up its lock this soon after it dies, so a takeover is quick.
LOCK_SECONDS = 3.0
# Long enough for the stack to start a few sandboxes on a busy two-core machine.
FILL_SECONDS = 120.0


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis.private(tmp_path_factory.mktemp("redis")) as url:
        yield url
        warm_pools.drain_all()


@pytest.fixture
def connect(monkeypatch: pytest.MonkeyPatch) -> Callable[[ServerInfo], None]:
    """Point the default connection at ``server``, for the keepers and backends alike."""

    def to(server: ServerInfo) -> None:
        for name, value in server.airflow_connection_env(CONN_ID).items():
            monkeypatch.setenv(name, value)

    return to


@pytest.fixture
def make_pool(redis_url: str) -> Iterator[Callable[..., WarmPool]]:
    """A pool with a name of its own in the run's Redis, drained when the test ends."""
    pools: list[WarmPool] = []

    def make(**arguments: Any) -> WarmPool:
        arguments.setdefault("name", f"test-{uuid.uuid4().hex[:10]}")
        arguments.setdefault("size", 1)
        arguments.setdefault("store", redis_url)
        arguments.setdefault("spec", OPEN)
        pools.append(warm_pools.register(WarmPool(**arguments)))
        return pools[-1]

    yield make
    for pool in pools:
        drain(pool)
        warm_pools.forget(pool)


@pytest.fixture
def handles() -> Iterator[list[tuple[OpenSandboxBackend, str]]]:
    """Sandboxes a test took or created, destroyed when it ends."""
    taken: list[tuple[OpenSandboxBackend, str]] = []
    yield taken
    for backend, handle in taken:
        backend.destroy(handle)


@pytest.fixture
def manager(plain_server: ServerInfo) -> Iterator[SandboxManagerSync]:
    client = SandboxManagerSync.create(plain_server.connection_config())
    yield client
    client.close()


def idle_ids(pool: WarmPool) -> set[str]:
    return {entry.sandbox_id for entry in state_store(pool).snapshot_idle_entries(pool.name)}


def filled(pool: WarmPool) -> Keeper:
    keeper = Keeper(pool, lock_seconds=LOCK_SECONDS)
    keeper.start()
    try:
        assert keeper.wait_until_full(FILL_SECONDS), f"pool {pool.name} did not fill"
    finally:
        keeper.stop()
    return keeper


def take(backend: OpenSandboxBackend, handles: list, spec: SandboxSpec | None = OPEN) -> str:
    handle = backend.create(spec=spec)
    handles.append((backend, handle))
    return handle


def test_a_task_takes_a_ready_sandbox_from_the_pool_with_its_own_metadata_and_lease(
    plain_server, connect, make_pool, handles, manager, monkeypatch
) -> None:
    connect(plain_server)
    pool = make_pool(size=1, idle_lease=120)
    filled(pool)
    (idle,) = idle_ids(pool)
    assert manager.get_sandbox_info(idle).metadata[FINGERPRINT_KEY] == pool.creation.fingerprint()

    backend = OpenSandboxBackend(CONN_ID, warm_pool=pool, sandbox_timeout=3600)
    stats = recording(monkeypatch)
    handle = take(backend, handles)

    assert handle == idle
    # A hit of this pool, and the sandbox's way to ready timed under the warm route.
    assert stats.names() == ["opensandbox.warm_pool.hit", "opensandbox.sandbox.create.warm_pool"]
    assert stats.sent[0][3] == {"pool": pool.name}
    assert idle_ids(pool) == set()
    assert backend.run_command(handle, "echo warm", timeout=30, max_output_bytes=64).stdout == (
        "warm\n"
    )
    info = manager.get_sandbox_info(handle)
    # Stamped as the backend creates: its lease and a name of its own, the pool's mark kept.
    assert info.metadata["lease-seconds"] == "3600"
    assert info.metadata["name"].startswith("airflow-sandbox-")
    assert info.metadata[POOL_KEY] == pool.name
    # Renewed from the idle lease (120 s) to the backend's.
    assert (info.expires_at - datetime.now(UTC)).total_seconds() > 3000


def test_a_pools_private_value_reaches_the_task_but_no_sandboxs_metadata(
    plain_server, connect, make_pool, handles, manager, caplog
) -> None:
    connect(plain_server)
    secret = f"pool-private-{uuid.uuid4().hex[:12]}"
    pool = make_pool(
        size=1,
        spec=SandboxSpec(block_network=False, env={"MODE": "fast"}),
        private_env={"API_TOKEN": secret},
    )
    # The texts a fingerprint over the value would hash: the environment holding it, and the
    # creation arguments, which the fingerprint hashed before private values were left out.
    canonical = pool.creation.canonical()
    holding = [
        json.dumps(part, sort_keys=True, separators=(",", ":"))
        for part in (canonical["env"], canonical)
    ]
    filled(pool)
    (idle,) = idle_ids(pool)
    warmed = manager.get_sandbox_info(idle)
    assert warmed.metadata[FINGERPRINT_KEY] == pool.creation.fingerprint()
    assert giving_away(warmed.metadata, secret, *holding) == []
    assert secret not in warmed.model_dump_json()

    caplog.set_level(logging.DEBUG, logger="opensandbox_provider")
    backend = OpenSandboxBackend(CONN_ID, warm_pool=pool)
    handle = take(
        backend,
        handles,
        spec=SandboxSpec(block_network=False, env={"MODE": "fast", "API_TOKEN": secret}),
    )

    # Served from the pool, and the command sees the value itself: it prints its digest.
    assert handle == idle
    printed = backend.run_command(
        handle, 'printf %s "$API_TOKEN" | sha256sum', timeout=30, max_output_bytes=256
    ).stdout
    assert printed.split()[0] == hashlib.sha256(secret.encode()).hexdigest()
    drawn = manager.get_sandbox_info(handle)
    assert drawn.metadata[POOL_KEY] == pool.name
    assert giving_away(drawn.metadata, secret, *holding) == []
    assert secret not in drawn.model_dump_json()
    assert secret not in caplog.text


def test_a_sandbox_taken_from_the_pool_is_destroyed_after_use_and_never_served_again(
    plain_server, connect, make_pool, handles
) -> None:
    connect(plain_server)
    pool = make_pool(size=1)
    filled(pool)
    backend = OpenSandboxBackend(CONN_ID, warm_pool=pool)
    first = backend.create(spec=OPEN)
    backend.destroy(first)
    assert not plain_server.has_sandbox(first)

    filled(pool)
    second = take(backend, handles)
    assert second != first


@pytest.mark.parametrize("when_empty", ["cold", "fail"])
def test_an_empty_pool_creates_cold_or_fails_as_it_says(
    when_empty, plain_server, connect, make_pool, handles, caplog
) -> None:
    connect(plain_server)
    pool = make_pool(size=1, when_empty=when_empty)
    backend = OpenSandboxBackend(CONN_ID, warm_pool=pool)
    caplog.set_level(logging.INFO, logger="opensandbox_provider")

    if when_empty == "fail":
        with pytest.raises(SandboxTerminalError, match="when_empty='fail'"):
            take(backend, handles)
        assert handles == []
        return
    handle = take(backend, handles)
    assert plain_server.has_sandbox(handle)
    assert f"Not taking a sandbox from warm pool {pool.name}: it has no idle sandbox" in caplog.text
    assert "Created OpenSandbox sandbox" in caplog.text


@pytest.mark.parametrize("when_empty", ["cold", "fail"])
def test_a_pool_whose_store_cannot_be_reached_counts_as_empty(
    when_empty, plain_server, connect, handles, caplog
) -> None:
    connect(plain_server)
    # Nothing listens on port 1 of loopback: the connection is refused at once.
    pool = WarmPool("unreachable", 1, "redis://127.0.0.1:1/0", spec=OPEN, when_empty=when_empty)
    backend = OpenSandboxBackend(CONN_ID, warm_pool=pool)
    caplog.set_level(logging.WARNING, logger="opensandbox_provider")
    if when_empty == "fail":
        with pytest.raises(SandboxTerminalError, match="store could not be reached"):
            take(backend, handles)
        return
    assert plain_server.has_sandbox(take(backend, handles))
    assert "its store could not be reached" in caplog.text


@pytest.mark.parametrize("on_mismatch", ["cold", "fail"])
def test_a_spec_that_differs_from_the_pools_is_never_served_from_it(
    on_mismatch, plain_server, connect, make_pool, handles, caplog
) -> None:
    connect(plain_server)
    pool = make_pool(
        size=1, spec=SandboxSpec(block_network=False, env={"TOOL": "1"}), on_mismatch=on_mismatch
    )
    filled(pool)
    (idle,) = idle_ids(pool)
    backend = OpenSandboxBackend(CONN_ID, warm_pool=pool)
    caplog.set_level(logging.INFO, logger="opensandbox_provider")

    if on_mismatch == "fail":
        with pytest.raises(SandboxTerminalError, match="on_mismatch='fail'"):
            take(backend, handles, spec=OPEN)
    else:
        handle = take(backend, handles, spec=OPEN)
        assert handle != idle
        assert "Created OpenSandbox sandbox" in caplog.text
        assert "differ from this task's in env (names ['TOOL'] against [])" in caplog.text
    # The pool's sandbox is still there for a task that matches it.
    assert idle_ids(pool) == {idle}
    assert take(backend, handles, spec=pool.spec) == idle


def test_an_idle_sandbox_of_another_definition_under_the_same_name_is_destroyed_not_served(
    plain_server, connect, make_pool, handles, caplog
) -> None:
    connect(plain_server)
    small = make_pool(size=1, cpu="500m")
    filled(small)
    (idle,) = idle_ids(small)
    other = make_pool(name=small.name, size=1, cpu="1")
    caplog.set_level(logging.INFO, logger="opensandbox_provider")

    handle = take(OpenSandboxBackend(CONN_ID, warm_pool=other, cpu="1"), handles)

    assert handle != idle
    assert "was made with other arguments" in caplog.text
    assert not plain_server.has_sandbox(idle)


def test_a_sandbox_the_store_hands_out_twice_stays_with_the_task_that_drew_it_first(
    plain_server, connect, make_pool, handles, manager, caplog
) -> None:
    connect(plain_server)
    pool = make_pool(size=1)
    filled(pool)
    first = take(OpenSandboxBackend(CONN_ID, warm_pool=pool), handles)
    stamped = manager.get_sandbox_info(first).metadata
    # What a Redis failover that replays the pop does: the drawn sandbox is idle once more.
    state_store(pool).put_idle(pool.name, first)
    caplog.set_level(logging.INFO, logger="opensandbox_provider")

    second = take(OpenSandboxBackend(CONN_ID, warm_pool=pool), handles)

    assert second != first
    assert "is not idle: its name is" in caplog.text
    # Left alone: still running, still stamped for the task that drew it first.
    assert manager.get_sandbox_info(first).metadata == stamped
    assert plain_server.has_sandbox(first)


def test_an_idle_sandbox_another_deployment_warmed_is_left_alone_not_served(
    plain_server, connect, make_pool, handles, manager, monkeypatch, caplog
) -> None:
    connect(plain_server)
    pool = make_pool(size=1)
    this_deployment = os.environ[DEPLOYMENT_OPTION]
    monkeypatch.setenv(DEPLOYMENT_OPTION, "another-deployment")
    filled(pool)
    (theirs,) = idle_ids(pool)
    monkeypatch.setenv(DEPLOYMENT_OPTION, this_deployment)
    caplog.set_level(logging.INFO, logger="opensandbox_provider")
    try:
        ours = take(OpenSandboxBackend(CONN_ID, warm_pool=pool), handles)
        assert ours != theirs
        assert "was warmed by Airflow deployment 'another-deployment'" in caplog.text
        assert plain_server.has_sandbox(theirs)
    finally:
        manager.kill_sandbox(theirs)


def test_a_sandbox_whose_egress_proof_fails_after_it_is_taken_is_destroyed_and_the_task_fails(
    dns_server, connect, make_pool, handles
) -> None:
    # The dns server's sidecar filters names only, so it never proves a deny-by-default policy
    # at the address layer: the pool is made there, and its sandbox fails the proof when taken.
    connect(dns_server)
    pool = make_pool(size=1, spec=SandboxSpec())
    filled(pool)
    (idle,) = idle_ids(pool)
    backend = OpenSandboxBackend(CONN_ID, warm_pool=pool)

    with pytest.raises(SandboxTerminalError, match="did not enforce the requested network policy"):
        take(backend, handles, spec=SandboxSpec())

    assert not dns_server.has_sandbox(idle)
    assert idle_ids(pool) == set()


def _draw_at_once(barrier: Any, results: Any, pool: WarmPool) -> None:
    backend = OpenSandboxBackend(CONN_ID, warm_pool=pool)
    barrier.wait()
    handles = [backend.create(spec=OPEN) for _ in range(2)]
    results.put(handles)
    for handle in handles:
        backend.destroy(handle)


def test_two_processes_drawing_at_once_never_get_the_same_sandbox(
    plain_server, connect, make_pool
) -> None:
    connect(plain_server)
    pool = make_pool(size=4, when_empty="fail")
    filled(pool)
    warmed = idle_ids(pool)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    workers = [
        context.Process(target=_draw_at_once, args=(barrier, results, pool)) for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    drawn = [results.get(timeout=180) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0

    taken = [handle for handles in drawn for handle in handles]
    assert len(taken) == 4
    assert set(taken) == warmed


KEEPER_MODULE = """
import os
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from opensandbox_provider.pool import WarmPool

POOL = WarmPool(
    os.environ["TEST_POOL_NAME"], size=1, store=os.environ["TEST_POOL_STORE"],
    spec=SandboxSpec(block_network=False), idle_lease=120,
)
"""


def _keeper_process(tmp_path: Path, pool: WarmPool) -> subprocess.Popen:
    (tmp_path / "keeper_pools.py").write_text(textwrap.dedent(KEEPER_MODULE))
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "TEST_POOL_NAME": pool.name,
        "TEST_POOL_STORE": str(pool.store),
    }
    command = [sys.executable, "-m", "opensandbox_provider.pool", "keep", "keeper_pools:POOL"]
    return subprocess.Popen(
        [*command, "--lock-seconds", str(LOCK_SECONDS)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / f"keeper-{uuid.uuid4().hex[:6]}.log").open("wb"),
    )


def _wait_for_idle(pool: WarmPool, count: int, timeout: float = FILL_SECONDS) -> set[str]:
    deadline = time.monotonic() + timeout
    while len(ids := idle_ids(pool)) < count:
        assert time.monotonic() < deadline, f"pool {pool.name} holds {len(ids)}, not {count}"
        time.sleep(0.2)
    return ids


def test_when_the_keeper_dies_another_takes_over_and_an_unkept_pool_ends_by_its_lease(
    plain_server, connect, make_pool, handles, manager, tmp_path
) -> None:
    connect(plain_server)
    pool = make_pool(size=1, idle_lease=120)
    first = _keeper_process(tmp_path, pool)
    second = None
    try:
        (idle,) = _wait_for_idle(pool, 1)
        # The first holds the primary lock by now; the second waits for it.
        second = _keeper_process(tmp_path, pool)
        time.sleep(LOCK_SECONDS)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        assert take(OpenSandboxBackend(CONN_ID, warm_pool=pool), handles) == idle
        (refill,) = _wait_for_idle(pool, 1)
        assert refill != idle
    finally:
        for keeper in (first, second):
            if keeper is not None and keeper.poll() is None:
                keeper.send_signal(signal.SIGKILL)
                keeper.wait(timeout=30)
    # Nothing keeps the pool now: its idle sandbox ends by its idle lease, unrenewed.
    left = (manager.get_sandbox_info(refill).expires_at - datetime.now(UTC)).total_seconds()
    assert 0 < left <= pool.idle_lease
