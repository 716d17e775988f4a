"""Why a sandbox never became ready, in a sentence with what to do, from the server's events.

On the Kubernetes runtime the server answers a create once the pod has an address, before
its containers run, so an image that cannot be pulled, a pod no node can hold or a container
that keeps exiting reaches the task as a readiness wait that ran out. The server keeps the
pod's events (its diagnostics API, ``runtime`` scope); those name the cause as Kubernetes
does, and each known cause becomes its own sentence here. On Docker the same causes refuse the
create itself, with the engine's words.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxTerminalError

from opensandbox_provider._errors import quoted, status_of, to_sandbox_error
from opensandbox_provider.sandbox import _registry

if TYPE_CHECKING:
    from opensandbox_provider.sandbox._lifecycle import Lifecycle

log = logging.getLogger(__name__)

EVENTS_SCOPE = "runtime"
# An image the kubelet could not pull, as it words it; said as a Docker server's refusal is.
PULL_FAILED = re.compile(r"ErrImagePull|ImagePullBackOff|Failed to pull image|InvalidImageName")
# A pod no node has room for, as a readiness wait and a refused create both tell it.
_NO_ROOM = (
    "No node of the cluster could take the sandbox's pod. Lower its cpu or memory (requests "
    "included), or ask the cluster's operators for room."
)
# Each other cause as the kubelet or the scheduler words it, and what the user should do. The
# first that an event matches is the one told.
CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"FailedScheduling|Insufficient |didn't match|nodes are available"), _NO_ROOM),
    (
        re.compile(r"OOMKilled|OOMKilling"),
        "The sandbox's container ran out of memory while it started. Raise memory.",
    ),
    (
        re.compile(r"CrashLoopBackOff|Back-off restarting failed container"),
        "The sandbox's container keeps exiting as it starts. Check that the image runs a "
        "long-lived process under the server's execd (a plain Linux image does).",
    ),
    (
        re.compile(r"Unhealthy|probe failed"),
        "The sandbox's pod started but never passed its readiness probe.",
    ),
)


def why_not_ready(
    lifecycle: Lifecycle, sandbox: str, *, image: str | None, registry_conn_id: str | None
) -> str:
    """The cause the server's events give, as sentences to add to the error; "" if none.
    ``image`` (None for a snapshot) and ``registry_conn_id`` are what the create asked for."""
    try:
        with lifecycle.call(f"read the events of sandbox {sandbox}") as api:
            events = api.get_diagnostic_events(sandbox, EVENTS_SCOPE).content or ""
    except SandboxError as e:
        # A server without the diagnostics API, or a sandbox already gone: the error as it was.
        log.info("Could not read the events of sandbox %s: %s", sandbox, e)
        return ""
    return diagnosed(events, image=image, registry_conn_id=registry_conn_id)


def diagnosed(events: str, *, image: str | None = None, registry_conn_id: str | None = None) -> str:
    """The first known cause among ``events`` (one per line), with the event that shows it."""
    pull = (
        _registry.pull_advice(image, registry_conn_id)
        if image
        else "The cluster could not pull the snapshot's image; prepare the snapshot again."
    )
    for pattern, advice in ((PULL_FAILED, pull), *CAUSES):
        for line in events.splitlines():
            if pattern.search(line):
                return f" {advice} The cluster's event: {quoted(line.strip(), 300)}."
    return ""


# The Kubernetes runtime's refusals of a create, by the server's error code or words, and what
# to do about each.
REFUSALS: tuple[tuple[str, str], ...] = (
    ("is unschedulable", _NO_ROOM),
    (
        "QUOTA_EXCEEDED",
        "The namespace's ResourceQuota has no room for the sandbox. Wait for other sandboxes "
        "to end (give the task retries), or ask for a larger quota.",
    ),
    (
        "POD_READY_TIMEOUT",
        "The sandbox's pod got no address before the server's own create timeout: the "
        "cluster is short of room or slow to start pods. Give the task retries, or raise the "
        "server's [kubernetes] sandbox_create_timeout_seconds.",
    ),
    (
        "POD_FAILED",
        "The sandbox's pod failed as it started. Check that the image runs on the cluster.",
    ),
)


def explain_refusal(
    error: Exception, *, image: str | None, registry_conn_id: str | None
) -> Exception | None:
    """A create the Kubernetes runtime refused, with what to do; else ``None``."""
    if status_of(error) is None:
        return None
    said = f"{getattr(getattr(error, 'error', None), 'code', '')} {error}"
    if image is not None and PULL_FAILED.search(said):
        # The pod failed because its image could not be pulled: said as on Docker.
        detail = to_sandbox_error(error, "create a sandbox", terminal=True)
        return SandboxTerminalError(f"{detail} {_registry.pull_advice(image, registry_conn_id)}")
    for words, advice in REFUSALS:
        if words in said:
            detail = to_sandbox_error(error, "create a sandbox", terminal=True)
            return SandboxTerminalError(f"{detail} {advice}")
    return None
