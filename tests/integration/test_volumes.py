"""Volumes against the real server: a named volume shared read-only, a host path, and the refusals.

The stack's servers allow one host directory (``[storage] allowed_host_paths``, see
``dev/stack/servers.py``; the local cluster's, ``dev/kube/opensandbox.py``, another, which the
stack's state names): a directory under it is mounted, and any other host path is refused.
Each named volume is made by the server for the sandbox that asks for it and removed with that
sandbox, which the run-wide leak check confirms.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from dev.stack.state import read_state, runtime
from opensandbox_provider.sandbox import HostPath, NamedVolume

OPEN = SandboxSpec(block_network=False)


ON_KUBERNETES = runtime() == "kubernetes"


def test_a_named_volume_is_shared_and_mounted_read_only_by_default(sandbox_on, plain_server):
    name = f"airflow-test-{uuid.uuid4().hex[:12]}"
    if not ON_KUBERNETES:
        _share_a_named_volume(sandbox_on, plain_server, name, created_with_sandbox=True)
        return
    from dev.kube.volumes import storage_for

    # On Kubernetes a volume two sandboxes share is a claim made beforehand (see below).
    with storage_for(name, user_claim=True):
        _share_a_named_volume(sandbox_on, plain_server, name, created_with_sandbox=False)


@pytest.mark.skipif(not ON_KUBERNETES, reason="the Docker runtime shares such a volume")
def test_on_kubernetes_a_volume_made_with_a_sandbox_is_that_sandboxs_alone(
    sandbox_on, plain_server
):
    from dev.kube.volumes import storage_for

    name = f"airflow-test-{uuid.uuid4().hex[:12]}"
    with storage_for(name):
        writer = sandbox_on(
            plain_server,
            OPEN,
            volumes=[NamedVolume(name, "/data", read_only=False, created_with_sandbox=True)],
        )
        assert writer.run("echo mine > /data/input.txt").exit_code == 0
        with pytest.raises(SandboxTerminalError) as raised:
            sandbox_on(plain_server, OPEN, volumes=[NamedVolume(name, "/data")])
        message = str(raised.value)
        assert f"PVC '{name}' is already managed by sandbox '{writer.handle}'" in message
        assert "Pre-create a user-managed PVC" in message
        writer.backend.destroy(writer.handle)


def _share_a_named_volume(sandbox_on, plain_server, name: str, *, created_with_sandbox: bool):
    writer = sandbox_on(
        plain_server,
        OPEN,
        volumes=[
            NamedVolume(name, "/data", read_only=False, created_with_sandbox=created_with_sandbox)
        ],
    )
    assert writer.run("echo shared > /data/input.txt").exit_code == 0
    reader = sandbox_on(plain_server, OPEN, volumes=[NamedVolume(name, "/data")])

    assert reader.run("cat /data/input.txt").stdout == "shared\n"
    refused = reader.run("touch /data/other.txt")
    assert refused.exit_code != 0
    assert "Read-only file system" in refused.stderr
    assert writer.run("test ! -e /data/other.txt").exit_code == 0
    # Before the writer, whose destroy removes the volume: a volume still mounted stays.
    reader.backend.destroy(reader.handle)
    writer.backend.destroy(writer.handle)


def test_a_host_path_the_server_does_not_allow_names_the_setting_to_change(
    backend_on, plain_server
):
    backend = backend_on(plain_server, volumes=[HostPath("/srv/airflow-data", "/data")])

    with pytest.raises(SandboxTerminalError) as raised:
        backend.create(spec=OPEN)

    message = str(raised.value)
    assert "VOLUME::HOST_PATH_NOT_ALLOWED" in message
    assert "[storage] allowed_host_paths" in message


@pytest.mark.not_on_kubernetes(
    reason="the Kubernetes runtime does not look for the claim: its pod waits for it, Pending, "
    "until KUBERNETES::POD_READY_TIMEOUT (test_a_missing_named_volume_on_kubernetes_...)"
)
def test_a_named_volume_that_does_not_exist_is_refused_with_what_to_do(backend_on, plain_server):
    missing = f"airflow-test-missing-{uuid.uuid4().hex[:12]}"
    backend = backend_on(plain_server, volumes=[NamedVolume(missing, "/data")])

    with pytest.raises(SandboxTerminalError) as raised:
        backend.create(spec=OPEN)

    message = str(raised.value)
    assert missing in message and "VOLUME::PVC_NOT_FOUND" in message
    assert "created_with_sandbox=True" in message


def test_a_host_path_the_server_allows_is_read_in_place_and_read_only_by_default(
    sandbox_on, plain_server
):
    # The stack's servers allow exactly one host directory; a directory under it is mounted.
    shared = Path(tempfile.mkdtemp(prefix="volume-test-", dir=read_state().host_mounts))
    try:
        (shared / "input.csv").write_text("a,b\n1,2\n")
        reader = sandbox_on(plain_server, OPEN, volumes=[HostPath(str(shared), "/data")])

        assert reader.run("cat /data/input.csv").stdout == "a,b\n1,2\n"
        refused = reader.run("touch /data/written.txt")
        assert refused.exit_code != 0
        assert "Read-only file system" in refused.stderr
        assert not (shared / "written.txt").exists()
    finally:
        shutil.rmtree(shared)


@pytest.mark.skipif(not ON_KUBERNETES, reason="the Docker runtime refuses a missing volume at once")
def test_a_missing_named_volume_on_kubernetes_fails_the_create_and_leaves_no_sandbox(
    backend_on, plain_server
):
    from dev.kube.opensandbox import batchsandboxes

    before = batchsandboxes()
    missing = f"airflow-test-missing-{uuid.uuid4().hex[:12]}"
    backend = backend_on(plain_server, volumes=[NamedVolume(missing, "/data")])

    started = time.monotonic()
    with pytest.raises(SandboxTerminalError, match="got no address before the server's own"):
        backend.create(spec=OPEN)
    # The create waits for the server's own answer, its 60 s for the pod, not the connection's
    # 30 s request timeout; the server then removes the sandbox it could not start.
    assert time.monotonic() - started < 90
    deadline = time.monotonic() + 90
    while batchsandboxes() - before and time.monotonic() < deadline:
        time.sleep(1)
    assert not batchsandboxes() - before
