"""Leases against the real server: a held sandbox outlives its lease, a dead worker's does not.

The lease is 60 s, the shortest lifetime the server accepts. The worker that dies is a
process this test starts and kills by its PID, mid-run, with SIGKILL, so nothing on it
gets a chance to clean up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from opensandbox import SandboxManagerSync, SandboxSync
from opensandbox.exceptions import SandboxApiException
from tests.stack.state import ServerInfo, StackState

from opensandbox_provider.sandbox._lease import Leases

LEASE = 60.0  # the server refuses a shorter lifetime (422)
# A sandbox past its lease that is still there is a failure, not a hang: the server's
# expiry timer fires on time, and removing the container takes well under a second.
REMOVAL_GRACE = 15.0

pytestmark = pytest.mark.slow

# The worker: creates a sandbox on a 60 s lease, holds it, writes its id, then works forever.
WORKER = """
import sys, time
from datetime import timedelta
from pathlib import Path
from opensandbox import SandboxManagerSync, SandboxSync
from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox_provider.sandbox._lease import Leases

domain, api_key, image, lease, id_file = sys.argv[1:]
lifetime = timedelta(seconds=float(lease))
def config():
    return ConnectionConfigSync(domain=domain, api_key=api_key, protocol="http")
sandbox = SandboxSync.create(image, timeout=lifetime, connection_config=config())
manager = SandboxManagerSync.create(config())
leases = Leases(lambda s: manager.renew_sandbox(s, lifetime), lease=float(lease))
leases.hold(sandbox.id)
Path(id_file).write_text(sandbox.id)
while True:
    time.sleep(3600)
"""


@pytest.fixture
def manager(plain_server: ServerInfo) -> Iterator[SandboxManagerSync]:
    sdk = SandboxManagerSync.create(plain_server.connection_config())
    try:
        yield sdk
    finally:
        sdk.close()


def renewer(manager: SandboxManagerSync):
    def renew(sandbox: str) -> bool:
        manager.renew_sandbox(sandbox, timedelta(seconds=LEASE))
        return True

    return renew


def exists(manager: SandboxManagerSync, sandbox: str) -> bool:
    try:
        manager.get_sandbox_info(sandbox)
    except SandboxApiException as error:
        if error.status_code == 404:
            return False
        raise
    return True


def containers_of(sandbox: str) -> list[str]:
    return subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            f"label=opensandbox.io/id={sandbox}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()


def destroy_unless_gone(manager: SandboxManagerSync, sandbox: str) -> None:
    try:
        manager.kill_sandbox(sandbox)
    except SandboxApiException as error:
        if error.status_code != 404:
            raise


def expires_at(manager: SandboxManagerSync, sandbox: str) -> datetime:
    expiry = manager.get_sandbox_info(sandbox).expires_at
    assert expiry is not None, "the sandbox was created with a lifetime, so it has an expiry"
    return expiry


def test_a_held_sandbox_outlives_its_lease(stack: StackState, plain_server: ServerInfo, manager):
    sandbox = SandboxSync.create(
        stack.sandbox_image,
        timeout=timedelta(seconds=LEASE),
        connection_config=plain_server.connection_config(),
    )
    leases = Leases(renewer(manager), lease=LEASE)
    try:
        created = datetime.now(UTC)
        leases.hold(sandbox.id)
        expiries = []
        while datetime.now(UTC) < created + timedelta(seconds=1.5 * LEASE):
            expiries.append(expires_at(manager, sandbox.id))
            time.sleep(5)

        result = sandbox.commands.run("echo still here")

        assert "".join(message.text for message in result.logs.stdout).strip() == "still here"
        assert expires_at(manager, sandbox.id) > created + timedelta(seconds=1.5 * LEASE)
        renewals = sorted(set(expiries))
        steps = [(later - earlier).total_seconds() for earlier, later in pairwise(renewals)]
        print(
            f"\nlease {LEASE:.0f}s, renewal every {leases.interval:.0f}s; expiry moved by {steps}"
        )
    finally:
        leases.drop(sandbox.id)
        sandbox.destroy()


def test_a_killed_workers_sandbox_is_reclaimed_within_one_lease(
    stack: StackState, plain_server: ServerInfo, manager, tmp_path: Path
):
    id_file = tmp_path / "sandbox-id"
    with (tmp_path / "worker.log").open("w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER, plain_server.domain, plain_server.api_key]
            + [stack.sandbox_image, str(LEASE), str(id_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    sandbox = None
    try:
        sandbox = wait_for_sandbox_id(worker, id_file, tmp_path / "worker.log")
        # Kill only once the worker has renewed on its own clock, so the sandbox it leaves
        # behind is alive because of a renewal, not because of its first lifetime.
        first = expires_at(manager, sandbox)
        deadline = time.monotonic() + LEASE
        while expires_at(manager, sandbox) <= first and time.monotonic() < deadline:
            time.sleep(1)
        last_expiry = expires_at(manager, sandbox)
        assert last_expiry > first, "the worker never renewed its lease"

        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        killed = datetime.now(UTC)
        deadline = time.monotonic() + LEASE + REMOVAL_GRACE
        while exists(manager, sandbox) and time.monotonic() < deadline:
            time.sleep(1)
        gone = datetime.now(UTC)

        assert not exists(manager, sandbox)
        assert containers_of(sandbox) == []
        print(
            f"\nlease {LEASE:.0f}s: sandbox gone {(gone - killed).total_seconds():.1f}s after the "
            f"worker was killed, {(gone - last_expiry).total_seconds():+.1f}s from the expiry "
            "its last renewal set"
        )
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
        if sandbox is not None:
            destroy_unless_gone(manager, sandbox)


def wait_for_sandbox_id(worker: subprocess.Popen, id_file: Path, log: Path) -> str:
    deadline = time.monotonic() + 120
    while not id_file.exists():
        if worker.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"The worker never reported its sandbox:\n{log.read_text()}")
        time.sleep(0.2)
    return id_file.read_text()
