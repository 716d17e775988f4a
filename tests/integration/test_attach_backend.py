"""Attaching through OpenSandboxBackend, against the real server: common-ai's rules, end to end.

Each test provisions with one backend instance and attaches with others, as tasks on
different workers would, so nothing is shared but the server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from airflow.providers.common.ai.sandbox.base import (
    EXPIRES_AT_TAG,
    HOLDER_TAG,
    NETWORK_TAG,
    OWNER_TAG,
    WORKDIR_TAG,
    SandboxError,
    SandboxSpec,
    SandboxTerminalError,
    decode_network_policy,
)
from opensandbox import SandboxManagerSync

from dev.stack.state import ServerInfo
from opensandbox_provider import _tags
from opensandbox_provider.sandbox import OpenSandboxBackend

OWNER = "attach_dag/manual__2026-01-01T00:00:00+00:00"
HOLDER = f"{OWNER}/agent[0]"
OTHER_HOLDER = f"{OWNER}/agent[1]"
WORKDIR = "/home/agent/work"
LIFETIME = 300.0


@pytest.fixture
def backend_for(
    backend_on, plain_server: ServerInfo
) -> Iterator[Callable[..., OpenSandboxBackend]]:
    """A new backend on the plain server per call, as each task on its own worker has one."""
    made: list[OpenSandboxBackend] = []

    def make(**arguments) -> OpenSandboxBackend:
        made.append(backend_on(plain_server, sandbox_timeout=LIFETIME, **arguments))
        return made[-1]

    yield make
    for backend in made:
        for held in backend._leases.held():
            backend._leases.drop(held)


@pytest.fixture
def provisioned(backend_for) -> Iterator[str]:
    creator = backend_for(workdir=WORKDIR)
    handle = creator.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    try:
        yield handle
    finally:
        creator.destroy(handle)


@pytest.fixture
def attacher(backend_for) -> OpenSandboxBackend:
    return backend_for()


def test_creating_with_an_owner_stamps_owner_network_workdir_and_expiry(provisioned, attacher):
    tags = attacher.read_tags(provisioned)

    assert tags[OWNER_TAG] == OWNER
    assert decode_network_policy(tags[NETWORK_TAG]) == SandboxSpec(block_network=False)
    assert tags[WORKDIR_TAG] == WORKDIR
    assert 0 < int(tags[EXPIRES_AT_TAG]) - time.time() <= LIFETIME
    assert HOLDER_TAG not in tags


def test_the_expiry_tag_is_the_servers_own_expiry(provisioned, attacher, plain_server):
    manager = SandboxManagerSync.create(plain_server.connection_config())
    try:
        expires_at = manager.get_sandbox_info(provisioned).expires_at
    finally:
        manager.close()

    assert attacher.read_tags(provisioned)[EXPIRES_AT_TAG] == str(int(expires_at.timestamp()))


def test_the_owner_attaches_and_learns_the_network_and_workdir(provisioned, attacher):
    attached = attacher.attach(provisioned, owner=OWNER, holder=HOLDER)

    assert attached.network == SandboxSpec(block_network=False)
    assert attached.workdir == WORKDIR
    # Its own lease keeps the sandbox alive for as long as it holds it.
    assert attached.remaining_lifetime is None
    assert attacher.read_tags(provisioned)[HOLDER_TAG] == HOLDER


def test_a_wrong_owner_is_refused(provisioned, attacher):
    with pytest.raises(SandboxTerminalError, match="is not owned by 'other_dag/run'"):
        attacher.attach(provisioned, owner="other_dag/run", holder="other_dag/run/agent")

    assert HOLDER_TAG not in attacher.read_tags(provisioned)


def test_a_sandbox_provisioned_without_an_owner_cannot_be_attached(backend_for, attacher):
    creator = backend_for()
    handle = creator.create(spec=SandboxSpec(block_network=False))
    try:
        with pytest.raises(SandboxTerminalError, match="it carries no owner"):
            attacher.attach(handle, owner=OWNER, holder=HOLDER)
    finally:
        creator.destroy(handle)


def test_a_second_holder_is_refused_while_the_first_holds_it(provisioned, attacher, backend_for):
    attacher.attach(provisioned, owner=OWNER, holder=HOLDER)
    second = backend_for()

    with pytest.raises(SandboxTerminalError, match=r"already held by .*agent\[0\]"):
        second.attach(provisioned, owner=OWNER, holder=OTHER_HOLDER)

    assert attacher.read_tags(provisioned)[HOLDER_TAG] == HOLDER


def test_the_same_holder_attaches_again_after_an_attempt_that_died(provisioned, backend_for):
    died = backend_for()
    died.attach(provisioned, owner=OWNER, holder=HOLDER)
    died.write_file(provisioned, "progress.txt", b"half way\n")
    died._leases.drop(provisioned)  # the worker died: no release, no more renewals
    retry = backend_for()

    attached = retry.attach(provisioned, owner=OWNER, holder=HOLDER)

    assert attached.workdir == WORKDIR
    assert retry.read_file(provisioned, "progress.txt", max_bytes=100) == b"half way\n"
    retry.release(provisioned, holder=HOLDER)


def test_release_clears_the_holder_and_nothing_else(provisioned, attacher, plain_server):
    before = attacher.read_tags(provisioned)
    attacher.attach(provisioned, owner=OWNER, holder=HOLDER)

    attacher.release(provisioned, holder=HOLDER)

    after = attacher.read_tags(provisioned)
    assert HOLDER_TAG not in after
    assert {k: v for k, v in after.items() if k != EXPIRES_AT_TAG} == {
        k: v for k, v in before.items() if k != EXPIRES_AT_TAG
    }
    manager = SandboxManagerSync.create(plain_server.connection_config())
    try:
        metadata = manager.get_sandbox_info(provisioned).metadata or {}
    finally:
        manager.close()
    assert metadata["created-by"] == "airflow"
    assert _tags.decode(metadata) == {k: v for k, v in after.items() if k != EXPIRES_AT_TAG}


def test_after_release_another_holder_may_attach(provisioned, attacher, backend_for):
    attacher.attach(provisioned, owner=OWNER, holder=HOLDER)
    attacher.release(provisioned, holder=HOLDER)
    second = backend_for()

    second.attach(provisioned, owner=OWNER, holder=OTHER_HOLDER)

    assert second.read_tags(provisioned)[HOLDER_TAG] == OTHER_HOLDER
    second.release(provisioned, holder=OTHER_HOLDER)


def test_releasing_someone_elses_claim_leaves_it(provisioned, attacher):
    attacher.attach(provisioned, owner=OWNER, holder=HOLDER)

    attacher.release(provisioned, holder=OTHER_HOLDER)

    assert attacher.read_tags(provisioned)[HOLDER_TAG] == HOLDER


def test_a_sandbox_that_is_gone_cannot_be_attached(backend_for, attacher):
    creator = backend_for()
    handle = creator.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    creator.destroy(handle)

    with pytest.raises(SandboxTerminalError):
        attacher.attach(handle, owner=OWNER, holder=HOLDER)


def test_tags_rewritten_by_someone_else_are_reported_not_trusted(
    provisioned, attacher, plain_server
):
    manager = SandboxManagerSync.create(plain_server.connection_config())
    try:
        manager.patch_sandbox_metadata(
            provisioned, {f"{_tags.PREFIX}{OWNER_TAG}.0": "vsomeone_else"}
        )
    finally:
        manager.close()

    with pytest.raises(SandboxError, match="carries tags this backend cannot read"):
        attacher.attach(provisioned, owner=OWNER, holder=HOLDER)
