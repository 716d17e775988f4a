"""
Prepared environments: a sandbox set up once, kept as a snapshot, and started from again.

A set-up that takes minutes (a virtualenv, a model download, a built tree) is paid for once:
:func:`prepare_snapshot` runs it in a sandbox of its own, snapshots that sandbox and destroys
it, and ``OpenSandboxBackend(snapshot=...)`` starts every later sandbox from the snapshot's
files. The snapshot holds files only: a sandbox started from it gets the network policy,
environment and owner of the task that creates it, never those of the set-up.

The snapshot is named for a hash of what made it (the image or snapshot it started from, the
commands, the set-up's environment and working directory), so preparing again with the same
inputs finds the snapshot already made instead of making another.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from opensandbox_provider._errors import done_unless_missing
from opensandbox_provider._url_secrets import without_url_secrets

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opensandbox.models.sandboxes import SnapshotInfo

    from opensandbox_provider.sandbox._lifecycle import Lifecycle
    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

log = logging.getLogger(__name__)

NAME_PREFIX = "airflow-env-"
# 96 bits of SHA-256: two different set-ups never meet under one name in any server's life.
_DIGEST_HEX = 24
# Bumped when what goes into the hash changes meaning, so an old snapshot is not taken for a
# new one.
_NAME_VERSION = 1
READY_STATE = "Ready"
FAILED_STATE = "Failed"
# The Docker runtime commits the container's whole filesystem; a large tree takes minutes.
SNAPSHOT_READY_TIMEOUT = 900.0
_POLL_INTERVAL = 0.5
# How much of a failed set-up command's output the error quotes.
_QUOTED_OUTPUT = 2000


def snapshot_name(
    *, base: str, commands: Sequence[str], env: dict[str, str], workdir: str | None
) -> str:
    """
    The name of the snapshot these inputs make: the same inputs, the same name.

    A credential in a URL of a command is left out: the name is shown to every holder of
    the server's API key, and a digest of a secret lets one guess it offline; a rotated
    token still finds the snapshot it made.
    """
    inputs = {
        "version": _NAME_VERSION,
        "base": base,
        "commands": [without_url_secrets(command) for command in commands],
        "env": dict(sorted(env.items())),
        "workdir": workdir,
    }
    encoded = json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()
    return NAME_PREFIX + hashlib.sha256(encoded).hexdigest()[:_DIGEST_HEX]


def prepare_snapshot(
    backend: OpenSandboxBackend,
    commands: Sequence[str],
    *,
    spec: SandboxSpec | None = None,
    command_timeout: float = 3600.0,
    max_output_bytes: int = 64 * 1024,
) -> str:
    """
    The id of a snapshot of ``backend``'s image (or snapshot) after ``commands`` ran in it.

    When a ready snapshot of the same inputs exists it is returned and nothing runs.
    Otherwise a sandbox is created with ``spec`` (by default with the network open, as a
    set-up that installs packages needs), each command runs in turn and must exit 0, the
    sandbox is snapshotted and then destroyed, whatever happened. ``spec.env`` is part of
    the snapshot: the Docker runtime keeps a container's environment in the image it
    commits, so never pass a secret to a set-up. Call it from a ``@task`` and hand the id to
    the tasks whose backend is ``OpenSandboxBackend(snapshot=...)``; delete the snapshot
    with :func:`delete_snapshot` when no task needs it any more.
    """
    spec = SandboxSpec(block_network=False) if spec is None else spec
    if spec.owner is not None:
        raise ValueError(
            "A prepared environment is not provisioned for a task: drop SandboxSpec.owner, "
            "and give the owner to the spec of the tasks that start from the snapshot."
        )
    commands = list(commands)
    if not commands or not all(isinstance(c, str) and c.strip() for c in commands):
        raise ValueError("commands must be a non-empty list of non-empty shell commands.")
    base = f"snapshot:{backend.snapshot}" if backend.snapshot else f"image:{backend.image}"
    name = snapshot_name(
        base=base, commands=commands, env=dict(spec.env or {}), workdir=backend.workdir
    )
    existing = find_snapshot(backend._lifecycle, name)
    if existing is not None:
        log.info("Reusing snapshot %s (%s): it was prepared with the same inputs.", existing, name)
        return existing
    started = time.monotonic()
    sandbox = backend.create(spec=spec)
    try:
        for command in commands:
            _run_set_up(backend, sandbox, command, command_timeout, max_output_bytes)
        with backend._lifecycle.call(f"snapshot sandbox {sandbox}") as api:
            snapshot = api.create_snapshot(sandbox, name=name)
        ready = _wait_until_ready(backend._lifecycle, snapshot.id)
    finally:
        backend.destroy(sandbox)
    log.info(
        "Prepared snapshot %s (%s) from %s in %.2fs.",
        ready.id,
        name,
        base,
        time.monotonic() - started,
    )
    return _one_of_a_name(backend, name, ready.id)


def _one_of_a_name(backend: OpenSandboxBackend, name: str, made: str) -> str:
    """
    The snapshot every run of these inputs uses: ``made``, unless a run that prepared at the
    same time made one first; then that one, and ``made`` is deleted, so two workers racing
    to prepare leave one snapshot between them.
    """
    oldest = find_snapshot(backend._lifecycle, name)
    if oldest is None or oldest == made:
        return made
    log.info("Snapshot %s of the same inputs was made first; using it instead.", oldest)
    delete_snapshot(backend, made)
    return oldest


def find_snapshot(lifecycle: Lifecycle, name: str) -> str | None:
    """The id of the oldest ready snapshot named ``name``, or ``None``."""
    from opensandbox.models.sandboxes import SnapshotFilter

    with lifecycle.call(f"look for snapshot {name}") as api:
        page = api.list_snapshots(SnapshotFilter(name=name, states=[READY_STATE]))
    # Two runs preparing at once can both make one; every later run takes the same of them.
    ready = sorted(page.snapshot_infos, key=lambda info: (info.created_at, info.id))
    return ready[0].id if ready else None


def delete_snapshot(backend: OpenSandboxBackend, snapshot_id: str) -> None:
    """
    Delete a snapshot; one already gone is as deleted. Every sandbox started from it must
    be destroyed first: the server refuses to delete the image a container runs.
    """
    with backend._lifecycle.call(f"delete snapshot {snapshot_id}") as api:
        deleted = done_unless_missing(lambda: api.delete_snapshot(snapshot_id))
    if deleted:
        log.info("Deleted snapshot %s.", snapshot_id)
    else:
        log.info("Snapshot %s was already gone.", snapshot_id)


def _run_set_up(
    backend: OpenSandboxBackend,
    sandbox: str,
    command: str,
    timeout: float,
    max_output_bytes: int,
) -> None:
    result = backend.run_command(
        sandbox, command, timeout=timeout, max_output_bytes=max_output_bytes
    )
    if result.exit_code != 0:
        # Quoted without the credentials a URL in it carries (pip_args' index), which pip
        # may print back.
        raise SandboxTerminalError(
            f"The set-up command {without_url_secrets(command)!r} exited with "
            f"{result.exit_code}, so no snapshot was made and its sandbox was destroyed. Its "
            f"stderr ended with: {without_url_secrets(result.stderr)[-_QUOTED_OUTPUT:]!r}"
        )


def _wait_until_ready(lifecycle: Lifecycle, snapshot_id: str) -> SnapshotInfo:
    deadline = time.monotonic() + SNAPSHOT_READY_TIMEOUT
    while True:
        with lifecycle.call(f"read snapshot {snapshot_id}") as api:
            info = api.get_snapshot(snapshot_id)
        state = info.status.state
        if state == READY_STATE:
            return info
        if state == FAILED_STATE:
            raise SandboxTerminalError(
                f"The server could not make snapshot {snapshot_id}: "
                f"{info.status.reason}: {info.status.message}"
            )
        if time.monotonic() > deadline:
            raise SandboxTerminalError(
                f"Snapshot {snapshot_id} was still {state} after {SNAPSHOT_READY_TIMEOUT:g}s. "
                "Delete it with delete_snapshot once the server has finished with it."
            )
        time.sleep(_POLL_INTERVAL)
