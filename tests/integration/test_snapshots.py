"""Prepared environments against the real server: a set-up snapshotted once, started from again.

Every snapshot a test makes is deleted when it ends, after every sandbox started from it
(the server refuses to delete the image a container runs). Each test's set-up carries a
fresh token, so a snapshot found again was made by this run, not left by an earlier one.
Packets go only to a listener this test binds on the Docker bridge address.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from airflow.providers.common.ai.sandbox.base import OWNER_TAG, SandboxSpec, SandboxTerminalError
from opensandbox import SandboxManagerSync
from opensandbox.models.sandboxes import SandboxFilter, SnapshotFilter

from dev.stack.state import ServerInfo, StackState
from opensandbox_provider._deployment import deployment_id
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.sandbox import (
    OpenSandboxBackend,
    _snapshots,
    delete_snapshot,
    prepare_snapshot,
)
from tests.network.sandboxes import Listener

# Long enough for a SYN to an answering host on this machine, so a timeout means a drop.
CONNECT_TIMEOUT = 3
PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
    print("connected")
except OSError:
    print("dropped")
"""
# A set-up that takes real time without any network: a virtualenv, a package of a thousand
# generated modules byte-compiled in it, and a tree of ten thousand small files.
SLOW_SET_UP = [
    "python3 -m venv --without-pip /opt/env",
    "/opt/env/bin/python -c \"import pathlib; p = pathlib.Path('/opt/env/pkg'); p.mkdir(); "
    "[(p / ('m%d.py' % m)).write_text(''.join('def f%d(x):\\n    return x + %d\\n' % (i, i) "
    'for i in range(300))) for m in range(1000)]"',
    "/opt/env/bin/python -m compileall -q /opt/env/pkg",
    "/opt/env/bin/python -c \"import pathlib; [(pathlib.Path('/opt/tree/d%d' % d).mkdir("
    "parents=True, exist_ok=True), [pathlib.Path('/opt/tree/d%d/f%d' % (d, f)).write_text("
    "'x' * 1024) for f in range(100)]) for d in range(100)]\"",
]
READY_CHECK = (
    "test -x /opt/env/bin/python && test -f /opt/tree/d99/f99 && "
    "ls /opt/env/pkg/__pycache__ | grep -c m999"
)


@pytest.fixture
def snapshots() -> Iterator[list[tuple[OpenSandboxBackend, str]]]:
    """Snapshots a test made, each deleted when it ends, after the test's sandboxes."""
    made: list[tuple[OpenSandboxBackend, str]] = []
    yield made
    for backend, snapshot in made:
        delete_snapshot(backend, snapshot)


@pytest.fixture
def sandboxes() -> Iterator[list[tuple[OpenSandboxBackend, str]]]:
    made: list[tuple[OpenSandboxBackend, str]] = []
    yield made
    for backend, handle in made:
        backend.destroy(handle)


@pytest.fixture
def start(backend_on, sandboxes, snapshots) -> Callable[..., tuple[OpenSandboxBackend, str]]:
    """A sandbox on ``server`` from ``snapshot`` (or the plain image), destroyed at the end."""

    def create(server: ServerInfo, spec: SandboxSpec, snapshot: str | None = None):
        backend = backend_on(server, snapshot=snapshot)
        sandboxes.append((backend, backend.create(spec=spec)))
        return sandboxes[-1]

    return create


def run(backend: OpenSandboxBackend, handle: str, command: str):
    return backend.run_command(handle, command, timeout=120, max_output_bytes=64 * 1024)


def reach(backend: OpenSandboxBackend, handle: str, host: str, port: int) -> str:
    command = shlex.join(["python3", "-c", PROBE, host, str(port), str(CONNECT_TIMEOUT)])
    result = run(backend, handle, command)
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip()


@pytest.fixture
def listener(stack: StackState) -> Iterator[Listener]:
    bound = Listener(stack.bridge_ip)
    yield bound
    bound.close()


@pytest.mark.needs_snapshots
def test_preparing_again_with_the_same_inputs_reuses_the_snapshot_and_its_files(
    backend_on, plain_server, snapshots, start
):
    token = uuid.uuid4().hex
    set_up = [f"mkdir -p /opt/prepared && echo {token} > /opt/prepared/marker"]
    preparer = backend_on(plain_server)

    made = prepare_snapshot(preparer, set_up)
    snapshots.append((preparer, made))
    started = time.monotonic()
    again = prepare_snapshot(backend_on(plain_server), set_up)
    reused_in = time.monotonic() - started
    other = prepare_snapshot(preparer, [*set_up, "true"])
    snapshots.append((preparer, other))

    assert again == made
    assert other != made
    assert reused_in < 5, f"finding the snapshot again took {reused_in:.1f}s"
    backend, handle = start(plain_server, SandboxSpec(block_network=False), snapshot=made)
    assert run(backend, handle, "cat /opt/prepared/marker").stdout == f"{token}\n"
    # Nothing of the sandbox the snapshot was taken from is left on its sandboxes: no
    # sandbox is left running by the preparation, and the tags are the new one's own.
    assert OWNER_TAG not in backend.read_tags(handle)


@pytest.mark.needs_snapshots
def test_a_snapshot_prepared_with_the_network_open_starts_deny_all_under_the_default_spec(
    backend_on, dns_nft_server, stack, listener, snapshots, start
):
    token = uuid.uuid4().hex
    preparer = backend_on(dns_nft_server)
    # The set-up proves its network was open: it reached our listener, or it fails.
    probe = shlex.join(
        ["python3", "-c", PROBE, stack.bridge_ip, str(listener.port), str(CONNECT_TIMEOUT)]
    )
    set_up = [f"echo {token} > /opt/marker", f'test "$({probe})" = connected']
    snapshot = prepare_snapshot(preparer, set_up)
    snapshots.append((preparer, snapshot))
    assert len(listener.peers) == 1

    backend, handle = start(dns_nft_server, SandboxSpec(), snapshot=snapshot)

    assert run(backend, handle, "cat /opt/marker").stdout == f"{token}\n"
    assert reach(backend, handle, stack.bridge_ip, listener.port) == "dropped"
    assert len(listener.peers) == 1


def test_a_failed_set_up_makes_no_snapshot_and_leaves_no_sandbox(backend_on, plain_server):
    preparer = backend_on(plain_server)
    set_up = [f"echo {uuid.uuid4().hex}", "exit 3"]
    # The set-up's own sandbox, seen as it is made: other tests' sandboxes come and go on the
    # same server meanwhile.
    made: list[str] = []
    create = preparer.create

    def recorded_create(**arguments):
        made.append(create(**arguments))
        return made[-1]

    preparer.create = recorded_create  # type: ignore[method-assign]

    with pytest.raises(SandboxTerminalError, match="exited with 3, so no snapshot was made"):
        prepare_snapshot(preparer, set_up)

    name = _snapshots.snapshot_name(
        deployment=deployment_id(),
        base=f"image:{preparer.image}",
        commands=set_up,
        env={},
        workdir=None,
    )
    manager = SandboxManagerSync.create(plain_server.connection_config())
    try:
        named = manager.list_snapshots(SnapshotFilter(name=name)).snapshot_infos
    finally:
        manager.close()
    assert named == []
    assert len(made) == 1
    assert made[0] not in sandbox_ids(plain_server)


def sandbox_ids(server: ServerInfo) -> set[str]:
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        page = manager.list_sandbox_infos(SandboxFilter(page_size=100))
    finally:
        manager.close()
    return {info.id for info in page.sandbox_infos}


@pytest.mark.needs_snapshots
def test_time_to_first_command_from_the_plain_image_and_from_a_prepared_snapshot(
    backend_on, plain_server, snapshots, start, record_property
):
    token = uuid.uuid4().hex
    set_up = [f"echo {token} > /opt/token", *SLOW_SET_UP]
    preparer = backend_on(plain_server)

    started = time.monotonic()
    backend, handle = start(plain_server, SandboxSpec(block_network=False))
    for command in set_up:
        assert run(backend, handle, command).exit_code == 0
    assert run(backend, handle, READY_CHECK).exit_code == 0
    from_image = time.monotonic() - started

    prepared_at = time.monotonic()
    snapshot = prepare_snapshot(preparer, set_up)
    snapshots.append((preparer, snapshot))
    preparing = time.monotonic() - prepared_at

    started = time.monotonic()
    backend, handle = start(plain_server, SandboxSpec(block_network=False), snapshot=snapshot)
    assert run(backend, handle, READY_CHECK).exit_code == 0
    from_snapshot = time.monotonic() - started

    timings = {
        "image_plus_set_up_to_first_command_seconds": round(from_image, 2),
        "prepare_snapshot_seconds": round(preparing, 2),
        "snapshot_to_first_command_seconds": round(from_snapshot, 2),
    }
    print(json.dumps(timings))
    for name, value in timings.items():
        record_property(name, value)
    assert from_snapshot < from_image


@pytest.mark.needs_snapshots
def test_the_operator_starts_its_sandbox_from_a_snapshot_rendered_from_its_template(
    backend_on, plain_server, snapshots
):
    token = uuid.uuid4().hex
    preparer = backend_on(plain_server)
    snapshot = prepare_snapshot(preparer, [f"echo {token} > /opt/marker"])
    snapshots.append((preparer, snapshot))
    operator = OpenSandboxOperator(
        task_id="analyse",
        command="cat /opt/marker",
        snapshot="{{ prepared }}",
        spec=SandboxSpec(block_network=False),
    )
    operator.render_template_fields({"prepared": snapshot})

    # The operator destroys its sandbox however it ends, before the snapshot is deleted.
    assert operator.execute({}) == {"exit_code": 0, "stdout": f"{token}\n"}


def named(server: ServerInfo, name: str) -> list:
    """The snapshots on ``server`` named ``name``, oldest first, whatever their state."""
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        infos = manager.list_snapshots(SnapshotFilter(name=name)).snapshot_infos
    finally:
        manager.close()
    return sorted(infos, key=lambda info: info.created_at)


@pytest.mark.needs_snapshots
def test_a_snapshot_older_than_max_age_is_made_again_and_the_old_one_left_for_the_cleanup(
    backend_on, plain_server, snapshots, start
):
    # What the set-up makes differs at each run of it, as an unpinned requirement may.
    token = uuid.uuid4().hex
    set_up = [f"echo {token} > /opt/token && cat /proc/sys/kernel/random/uuid > /opt/built"]
    preparer = backend_on(plain_server)

    first = prepare_snapshot(preparer, set_up)
    snapshots.append((preparer, first))
    assert prepare_snapshot(preparer, set_up, max_age=timedelta(hours=1)) == first
    time.sleep(4)
    again = prepare_snapshot(preparer, set_up, max_age=3)
    snapshots.append((preparer, again))

    assert again != first
    (old, new) = named(plain_server, _name_of(plain_server, first))
    assert (old.id, new.id) == (first, again)
    assert old.status.state == new.status.state == "Ready"
    assert old.name.startswith(f"airflow-env-{deployment_id()}-")
    # An age between the two: the new one is reused, the old one is never taken again.
    between = datetime.now(UTC) - (old.created_at + (new.created_at - old.created_at) / 2)
    assert prepare_snapshot(preparer, set_up, max_age=between) == again
    built = {}
    for snapshot in (first, again):
        backend, handle = start(plain_server, SandboxSpec(block_network=False), snapshot=snapshot)
        assert run(backend, handle, "cat /opt/token").stdout == f"{token}\n"
        built[snapshot] = run(backend, handle, "cat /opt/built").stdout
    assert built[first] != built[again]


def _name_of(server: ServerInfo, snapshot: str) -> str:
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        return manager.get_snapshot(snapshot).name
    finally:
        manager.close()
