"""Leases against the real server: a held sandbox outlives its lease, a dead worker's does not.

The lease is 60 s, the shortest lifetime the server accepts. The worker that dies is a
process this test starts, holding a sandbox through OpenSandboxBackend as a toolset's run
would, and kills by its PID mid-run with SIGKILL, so nothing on it gets to clean up.
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
from airflow.providers.common.ai.sandbox.base import HOLDER_TAG, SandboxError, SandboxSpec
from opensandbox import SandboxManagerSync
from opensandbox.exceptions import SandboxApiException

from dev.stack.state import ServerInfo
from opensandbox_provider.sandbox._lease import renewal_interval
from tests.containers import assert_no_container

LEASE = 60.0  # the server refuses a shorter lifetime (422)
# A sandbox past its lease that is still there is a failure, not a hang: the server's
# expiry timer fires on time, and removing the container takes well under a second.
REMOVAL_GRACE = 15.0
OWNER = "lease_dag/manual__2026-01-01T00:00:00+00:00"
HOLDER = f"{OWNER}/agent"

# The worker: a backend creates a sandbox for its own run, which holds it on a 60 s lease;
# the worker writes the sandbox's id, then works forever.
WORKER = """
import sys, time
from pathlib import Path
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from opensandbox_provider.sandbox import OpenSandboxBackend

lease, id_file = sys.argv[1:]
backend = OpenSandboxBackend("opensandbox_default", sandbox_timeout=float(lease))
handle = backend.create(spec=SandboxSpec(block_network=False))
Path(id_file).write_text(handle)
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


@pytest.fixture
def leased(backend_on, plain_server):
    return backend_on(plain_server, sandbox_timeout=LEASE)


def exists(manager: SandboxManagerSync, sandbox: str) -> bool:
    try:
        manager.get_sandbox_info(sandbox)
    except SandboxApiException as error:
        if error.status_code == 404:
            return False
        raise
    return True


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


def seconds_left(manager: SandboxManagerSync, sandbox: str) -> float:
    return (expires_at(manager, sandbox) - datetime.now(UTC)).total_seconds()


@pytest.mark.slow
def test_a_sandbox_held_by_its_run_outlives_its_lease(leased, manager):
    created = datetime.now(UTC)
    handle = leased.create(spec=SandboxSpec(block_network=False))
    try:
        expiries = []
        while datetime.now(UTC) < created + timedelta(seconds=1.5 * LEASE):
            expiries.append(expires_at(manager, handle))
            time.sleep(5)

        # Asked for more than the lease, and given all of it: a held sandbox has no deadline.
        result = leased.run_command(handle, "echo still here", timeout=300, max_output_bytes=100)

        assert result.stdout == "still here\n"
        assert result.applied_timeout is None
        assert expires_at(manager, handle) > created + timedelta(seconds=1.5 * LEASE)
        steps = [(b - a).total_seconds() for a, b in pairwise(sorted(set(expiries)))]
        print(
            f"\nlease {LEASE:g}s, renewed every {renewal_interval(LEASE):g}s: expiry moved {steps}"
        )
    finally:
        leased.destroy(handle)
    assert leased._leases.held() == frozenset()


@pytest.mark.slow
def test_a_killed_workers_sandbox_is_reclaimed_within_one_lease(
    plain_server: ServerInfo, manager, tmp_path: Path
):
    id_file = tmp_path / "sandbox-id"
    env = {**os.environ, **plain_server.airflow_connection_env("opensandbox_default")}
    with (tmp_path / "worker.log").open("w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(LEASE), str(id_file)],
            env=env,
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
        assert_no_container(sandbox)
        print(
            f"\nlease {LEASE:g}s: sandbox gone {(gone - killed).total_seconds():.1f}s after the "
            f"worker was killed, {(gone - last_expiry).total_seconds():+.1f}s from the expiry "
            "its last renewal set"
        )
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
        if sandbox is not None:
            destroy_unless_gone(manager, sandbox)


def test_a_provisioned_sandbox_waits_for_its_tasks_unheld(leased):
    handle = leased.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    try:
        assert leased._leases.held() == frozenset()
    finally:
        leased.destroy(handle)


def test_attaching_late_starts_a_whole_lease_and_releasing_leaves_one(
    backend_on, plain_server, manager
):
    creator = backend_on(plain_server, sandbox_timeout=LEASE)
    handle = creator.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    try:
        # Late in the provisioned lifetime, as an agent task that waited in a queue would be.
        manager.renew_sandbox(handle, timedelta(seconds=5))
        agent = backend_on(plain_server, sandbox_timeout=LEASE)

        agent.attach(handle, owner=OWNER, holder=HOLDER)
        held_for = seconds_left(manager, handle)
        result = agent.run_command(handle, "true", timeout=120, max_output_bytes=100)
        agent.release(handle, holder=HOLDER)
        left_after_release = seconds_left(manager, handle)

        assert held_for > LEASE - 10
        assert result.applied_timeout is None
        assert agent._leases.held() == frozenset()
        assert left_after_release > LEASE - 10
    finally:
        creator.destroy(handle)


def test_attaching_never_shortens_the_lifetime_the_creator_gave(backend_on, plain_server, manager):
    creator = backend_on(plain_server, sandbox_timeout=2 * 3600)
    handle = creator.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    try:
        creators = expires_at(manager, handle)
        # An agent task whose own backend was configured with a far shorter lease.
        agent = backend_on(plain_server, sandbox_timeout=600)

        agent.attach(handle, owner=OWNER, holder=HOLDER)
        while_held = expires_at(manager, handle)
        agent.run_command(handle, "true", timeout=30, max_output_bytes=100)
        agent.release(handle, holder=HOLDER)
        after_release = expires_at(manager, handle)

        assert while_held >= creators
        assert after_release >= creators
        assert agent._leases.held() == frozenset()
    finally:
        creator.destroy(handle)


def test_a_release_retried_after_a_failure_still_leaves_a_whole_lease(
    backend_on, plain_server, manager, monkeypatch
):
    lifetime = 300.0  # renewed every 100 s: no renewal of the lease's own falls inside this test
    creator = backend_on(plain_server, sandbox_timeout=lifetime)
    handle = creator.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    try:
        agent = backend_on(plain_server, sandbox_timeout=lifetime)
        agent.attach(handle, owner=OWNER, holder=HOLDER)
        # Late in the lease, as when the agent's run went on right up to a renewal.
        manager.renew_sandbox(handle, timedelta(seconds=30))
        write_tags = agent.write_tags
        failures = [SandboxError("The metadata service did not answer.")]

        def blinking(sandbox, tags):
            if failures:
                raise failures.pop()
            write_tags(sandbox, tags)

        monkeypatch.setattr(agent, "write_tags", blinking)

        with pytest.raises(SandboxError, match="did not answer"):
            agent.release(handle, holder=HOLDER)
        agent.release(handle, holder=HOLDER)  # the toolset's retry

        assert HOLDER_TAG not in agent.read_tags(handle)
        assert seconds_left(manager, handle) > lifetime - 10
    finally:
        creator.destroy(handle)


def test_destroying_ends_the_renewals(leased):
    handle = leased.create(spec=SandboxSpec(block_network=False))
    assert leased._leases.held() == {handle}

    leased.destroy(handle)

    assert leased._leases.held() == frozenset()


def wait_for_sandbox_id(worker: subprocess.Popen, id_file: Path, log: Path) -> str:
    deadline = time.monotonic() + 120
    while not id_file.exists():
        if worker.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"The worker never reported its sandbox:\n{log.read_text()}")
        time.sleep(0.2)
    return id_file.read_text()
