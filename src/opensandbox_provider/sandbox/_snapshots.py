"""
Prepared environments: a sandbox set up once, kept as a snapshot named for this deployment and
a hash of its inputs, and started from again (docs/prepared-environments.rst).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import re
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from opensandbox_provider._deployment import DeploymentUnknownError, deployment_id
from opensandbox_provider._errors import done_unless_missing
from opensandbox_provider._url_secrets import without_url_secrets
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.sandbox import _arguments, _snapshot_use
from opensandbox_provider.sandbox._lifecycle import Lifecycle

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from opensandbox.models.sandboxes import SnapshotInfo

    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

log = logging.getLogger(__name__)

NAME_PREFIX = "airflow-env-"
# 96 bits of SHA-256: two different set-ups never meet under one name in any server's life.
_DIGEST_HEX = 24
_DIGEST = re.compile(f"[0-9a-f]{{{_DIGEST_HEX}}}")
# Bumped when what goes into the hash changes meaning, so an old snapshot is not taken for a
# new one.
_NAME_VERSION = 1
READY_STATE = "Ready"
FAILED_STATE = "Failed"
CREATING_STATE = "Creating"
# Snapshots asked for per request: the most the server answers in one page.
_PAGE_SIZE = 200
# The Docker runtime commits the container's whole filesystem; a large tree takes minutes.
SNAPSHOT_READY_TIMEOUT = 900.0
_POLL_INTERVAL = 0.5
# How much of a failed set-up command's output the error quotes.
_QUOTED_OUTPUT = 2000


def name_prefix(deployment: str) -> str:
    """What every snapshot name ``deployment`` gives begins with."""
    return f"{NAME_PREFIX}{deployment}-"


def snapshot_name(
    *, deployment: str, base: str, commands: Sequence[str], env: dict[str, str], workdir: str | None
) -> str:
    """
    The name of the snapshot these inputs make in ``deployment``: the same inputs, the same
    name, ``airflow-env-<deployment>-<hash>``.

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
    return name_prefix(deployment) + hashlib.sha256(encoded).hexdigest()[:_DIGEST_HEX]


def is_prepared_by(name: str | None, deployment: str) -> bool:
    """
    Whether ``name`` is one :func:`snapshot_name` gives ``deployment``. What follows the
    prefix must be the hash alone, so a deployment whose id begins with another's (``prod``
    and ``prod-eu``) never takes the other's snapshots for its own.
    """
    prefix = name_prefix(deployment)
    return (
        name is not None
        and name.startswith(prefix)
        and _DIGEST.fullmatch(name[len(prefix) :]) is not None
    )


def prepare_snapshot(
    backend: OpenSandboxBackend,
    commands: Sequence[str],
    *,
    spec: SandboxSpec | None = None,
    max_age: timedelta | float | None = None,
    command_timeout: float = 3600.0,
    max_output_bytes: int = 64 * 1024,
) -> str:
    """
    The id of a snapshot of ``backend``'s image (or snapshot) after ``commands`` ran in it, each
    exiting 0, in a sandbox made with ``spec`` (the network open by default) and destroyed
    after; the oldest ready one of the same inputs made within ``max_age`` (a ``timedelta`` or
    seconds; ``None``, any age) when there is one. ``spec.env`` is kept in the snapshot, so
    never pass a secret to a set-up. See docs/prepared-environments.rst.
    """
    age = _arguments.age(max_age, "max_age", none_means="never makes a snapshot again for its age")
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
    try:
        deployment = deployment_id()
    except DeploymentUnknownError as e:
        raise SandboxTerminalError(f"Could not prepare a snapshot: {e}") from e
    name = snapshot_name(
        deployment=deployment,
        base=base,
        commands=commands,
        env=dict(spec.env or {}),
        workdir=backend.workdir,
    )
    lifecycle = lifecycle_of(backend)
    ready = ready_snapshots(lifecycle, name)
    fresh = _made_within(ready, age)
    if fresh:
        log.info(
            "Reusing snapshot %s (%s): it was prepared with the same inputs.", fresh[0].id, name
        )
        _snapshot_use.record_use(fresh[0].id, name)
        return fresh[0].id
    if ready:
        log.info(
            "Snapshot %s (%s) was made at %s, longer ago than max_age (%s): preparing it again "
            "from the same inputs. The older one is left for sandboxes that may still start from "
            "it, and for the maintenance cleanup once no task uses it.",
            ready[-1].id,
            name,
            made_at(ready[-1]).isoformat(),
            age,
        )
    started = time.monotonic()
    sandbox = backend.create(spec=spec)
    try:
        for command in commands:
            result = backend.run_command(
                sandbox, command, timeout=command_timeout, max_output_bytes=max_output_bytes
            )
            if result.exit_code != 0:
                # Quoted without the credentials a URL in it carries (pip_args' index), which
                # pip may print back.
                stderr = without_url_secrets(result.stderr)[-_QUOTED_OUTPUT:]
                raise SandboxTerminalError(
                    f"The set-up command {without_url_secrets(command)!r} exited with "
                    f"{result.exit_code}, so no snapshot was made and its sandbox was destroyed. "
                    f"Its stderr ended with: {stderr!r}"
                )
        with lifecycle.call(f"snapshot sandbox {sandbox}") as api:
            snapshot = api.create_snapshot(sandbox, name=name)
        made = _wait_until_ready(lifecycle, snapshot.id)
    finally:
        backend.destroy(sandbox)
    log.info(
        "Prepared snapshot %s (%s) from %s in %.2fs.",
        made.id,
        name,
        base,
        time.monotonic() - started,
    )
    chosen = _one_of_a_name(lifecycle, name, made.id, age)
    _snapshot_use.record_use(chosen, name)
    return chosen


def _one_of_a_name(lifecycle: Lifecycle, name: str, made: str, max_age: timedelta | None) -> str:
    """
    The snapshot every run of these inputs uses: ``made``, unless a run that prepared at the
    same time made one first; then that one, and ``made`` is deleted, so two workers racing
    to prepare, the first time or again after ``max_age``, leave one snapshot between them.
    """
    oldest = find_snapshot(lifecycle, name, max_age=max_age)
    if oldest is None or oldest == made:
        return made
    log.info("Snapshot %s of the same inputs was made first; using it instead.", oldest)
    delete(lifecycle, made)
    return oldest


def find_snapshot(
    lifecycle: Lifecycle, name: str, *, max_age: timedelta | None = None
) -> str | None:
    """The id of the oldest ready snapshot named ``name`` made within ``max_age``, or ``None``."""
    fresh = _made_within(ready_snapshots(lifecycle, name), max_age)
    return fresh[0].id if fresh else None


def ready_snapshots(lifecycle: Lifecycle, name: str) -> list[SnapshotInfo]:
    """The ready snapshots named ``name``, oldest first."""
    # Two runs preparing at once can both make one; every later run takes the same of them.
    return sorted(
        listed_snapshots(lifecycle, name=name, states=[READY_STATE]),
        key=lambda info: (made_at(info), info.id),
    )


def listed_snapshots(
    lifecycle: Lifecycle, *, name: str | None = None, states: list[str] | None = None
) -> Iterator[SnapshotInfo]:
    """Every snapshot on the server with ``name`` and in ``states`` (any, when ``None``)."""
    from opensandbox.models.sandboxes import SnapshotFilter

    doing = f"list the snapshots named {name}" if name else "list snapshots"
    for page in itertools.count(1):
        with lifecycle.call(doing) as api:
            answer = api.list_snapshots(
                SnapshotFilter(name=name, states=states, page=page, page_size=_PAGE_SIZE)
            )
        yield from answer.snapshot_infos
        if not answer.pagination.has_next_page:
            return


def made_at(info: SnapshotInfo) -> datetime:
    """When the server made ``info``'s snapshot, in UTC."""
    return info.created_at if info.created_at.tzinfo else info.created_at.replace(tzinfo=UTC)


def _made_within(ready: list[SnapshotInfo], max_age: timedelta | None) -> list[SnapshotInfo]:
    if max_age is None:
        return ready
    # The server's clock against this worker's: a skew of seconds is nothing to an age of
    # hours or days.
    since = datetime.now(UTC) - max_age
    return [info for info in ready if made_at(info) > since]


def delete_snapshot(backend: OpenSandboxBackend, snapshot_id: str) -> None:
    """
    Delete a snapshot; one already gone is as deleted. Every sandbox started from it must
    be destroyed first: the server refuses to delete the image a container runs.
    """
    delete(lifecycle_of(backend), snapshot_id)


def lifecycle_of(backend: OpenSandboxBackend) -> Lifecycle:
    """
    The lifecycle API of the server ``backend``'s connection names: snapshots belong to the
    server, not to one of the backend's sandboxes, so they are reached from its settings.
    """
    return Lifecycle(lambda: OpenSandboxHook(backend.opensandbox_conn_id).connection_config)


def delete(lifecycle: Lifecycle, snapshot_id: str) -> None:
    """:func:`delete_snapshot` through ``lifecycle``, with the record of its last use."""
    with lifecycle.call(f"delete snapshot {snapshot_id}") as api:
        deleted = done_unless_missing(lambda: api.delete_snapshot(snapshot_id))
    log.info("Deleted snapshot %s." if deleted else "Snapshot %s was already gone.", snapshot_id)
    _snapshot_use.forget(snapshot_id)


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
