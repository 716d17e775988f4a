"""A provisioned sandbox waits paused between its tasks, against the real server.

Each task has its own backend, as tasks on different workers would; only the server is
shared. The server must report the sandbox Paused between them, and the next task must find
the first one's files without asking for a resume itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from airflow.providers.common.ai.sandbox.base import HOLDER_TAG, SandboxSpec
from opensandbox import SandboxManagerSync
from opensandbox.models.sandboxes import SandboxInfo

from dev.stack.state import ServerInfo
from opensandbox_provider.sandbox import OpenSandboxBackend
from opensandbox_provider.sandbox._pause import ON_THE_WAY
from tests.integration import test_egress
from tests.integration.conftest import Sandbox
from tests.integration.test_egress import reach

# The Kubernetes runtime pauses by committing the pod to its controller's snapshot registry.
pytestmark = pytest.mark.needs_snapshots

# The egress tests' listener on the Docker bridge.
listener = test_egress.listener

OWNER = "pause_dag/manual__2026-01-01T00:00:00+00:00"
FIRST = f"{OWNER}/first"
SECOND = f"{OWNER}/second"
WORKDIR = "/home/agent/work"
LEASE = 300.0


# How long a pause or a resume may take to settle: the Kubernetes runtime commits the pod and
# pushes it to a registry (about 7 s measured for this image), or starts a new pod from it.
SETTLE_SECONDS = 120


def info_of(server: ServerInfo, handle: str, *, settled: bool = True) -> SandboxInfo:
    """The sandbox's info; ``settled``, once it is no longer on its way between running and
    paused (the Docker runtime is never seen on its way)."""
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        deadline = time.monotonic() + SETTLE_SECONDS
        info = manager.get_sandbox_info(handle)
        while settled and info.status.state in ON_THE_WAY and time.monotonic() < deadline:
            time.sleep(0.5)
            info = manager.get_sandbox_info(handle)
        return info
    finally:
        manager.close()


def state_of(server: ServerInfo, handle: str, *, settled: bool = True) -> str:
    return str(info_of(server, handle, settled=settled).status.state)


@pytest.fixture
def provision(backend_on) -> Iterator[Callable[..., tuple[OpenSandboxBackend, str]]]:
    """Provision sandboxes for OWNER; each is destroyed, paused or not, when the test ends."""
    made: list[tuple[OpenSandboxBackend, str]] = []

    def create(server: ServerInfo, spec: SandboxSpec) -> tuple[OpenSandboxBackend, str]:
        creator = backend_on(server, sandbox_timeout=LEASE, workdir=WORKDIR)
        made.append((creator, creator.create(spec=spec)))
        return made[-1]

    yield create
    for creator, handle in made:
        creator.destroy(handle)


def test_a_released_sandbox_waits_paused_and_the_next_task_finds_its_files(
    provision, backend_on, plain_server, record_property
):
    _, handle = provision(plain_server, SandboxSpec(block_network=False, owner=OWNER))
    first = backend_on(plain_server, pause_when_released=True)
    first.attach(handle, owner=OWNER, holder=FIRST)
    first.write_file(handle, "notes.txt", b"left by the first task\n")
    first.release(handle, holder=FIRST)

    assert state_of(plain_server, handle) == "Paused"

    second = backend_on(plain_server)
    started = time.monotonic()
    second.attach(handle, owner=OWNER, holder=SECOND)
    attach_seconds = time.monotonic() - started
    result = second.run_command(handle, "cat notes.txt", timeout=30, max_output_bytes=1024)
    first_command_seconds = time.monotonic() - started
    print(
        f"attach with resume: {attach_seconds:.2f}s; "
        f"attach plus first command: {first_command_seconds:.2f}s"
    )
    record_property("resume_attach_seconds", round(attach_seconds, 3))
    record_property("resume_first_command_seconds", round(first_command_seconds, 3))

    assert state_of(plain_server, handle) == "Running"
    assert (result.exit_code, result.stdout) == (0, "left by the first task\n")
    second.release(handle, holder=SECOND)
    assert state_of(plain_server, handle) == "Running"


def test_a_command_on_a_paused_sandbox_resumes_it_without_an_attach(
    provision, backend_on, plain_server
):
    creator, handle = provision(plain_server, SandboxSpec(block_network=False, owner=OWNER))
    creator.write_file(handle, "notes.txt", b"before the pause\n")
    creator.pause(handle)
    # Not waited for: on the Kubernetes runtime the command comes while it is still pausing.
    assert state_of(plain_server, handle, settled=False) in {"Paused", *ON_THE_WAY}

    result = backend_on(plain_server).run_command(
        handle, "cat notes.txt", timeout=30, max_output_bytes=1024
    )

    assert (result.exit_code, result.stdout) == (0, "before the pause\n")
    assert state_of(plain_server, handle) == "Running"


def test_a_paused_sandbox_keeps_its_lease_and_its_expiry_does_not_move(
    provision, backend_on, plain_server
):
    _, handle = provision(plain_server, SandboxSpec(block_network=False, owner=OWNER))
    first = backend_on(plain_server, pause_when_released=True)
    first.attach(handle, owner=OWNER, holder=FIRST)
    first.release(handle, holder=FIRST)
    paused = info_of(plain_server, handle)
    time.sleep(2)
    later = info_of(plain_server, handle)

    assert paused.status.state == later.status.state == "Paused"
    # Nothing renews a paused sandbox: it ends one lease after the release unless a task
    # comes back for it.
    assert later.expires_at == paused.expires_at
    assert 0 < (paused.expires_at.timestamp() - time.time()) <= LEASE
    assert HOLDER_TAG not in first.read_tags(handle)


def test_a_deny_all_sandbox_resumed_still_enforces_its_policy(
    provision, backend_on, dns_nft_server, stack, listener
):
    _, handle = provision(dns_nft_server, SandboxSpec(owner=OWNER))
    first = backend_on(dns_nft_server, pause_when_released=True)
    first.attach(handle, owner=OWNER, holder=FIRST)
    first.release(handle, holder=FIRST)
    assert state_of(dns_nft_server, handle) == "Paused"

    second = backend_on(dns_nft_server)
    second.attach(handle, owner=OWNER, holder=SECOND)
    # The pause froze the sidecar's rules with the sandbox; thawed, they still drop packets.
    outcomes = reach(Sandbox(second, handle, dns_nft_server), (stack.bridge_ip, listener.port))

    assert outcomes == ["dropped"]
    assert listener.peers == []
    second.release(handle, holder=SECOND)
