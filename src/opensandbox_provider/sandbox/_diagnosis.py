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

from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider._errors import quoted

if TYPE_CHECKING:
    from opensandbox_provider.sandbox._lifecycle import Lifecycle

log = logging.getLogger(__name__)

EVENTS_SCOPE = "runtime"
# Each cause as the kubelet or the scheduler words it, and what the user should do. The
# first that an event matches is the one told.
CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"ErrImagePull|ImagePullBackOff|Failed to pull image|InvalidImageName"),
        "The cluster could not pull the sandbox's image. Check that the image exists and is "
        "named with its registry, and for a private registry give registry_conn_id, a docker "
        "connection with its login.",
    ),
    (
        re.compile(r"FailedScheduling|Insufficient |didn't match|nodes are available"),
        "No node of the cluster could take the sandbox's pod. Lower its cpu or memory "
        "(requests included), or ask the cluster's operators for room.",
    ),
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


def why_not_ready(lifecycle: Lifecycle, sandbox: str) -> str:
    """The cause the server's events give, as sentences to add to the error; "" if none."""
    try:
        with lifecycle.call(f"read the events of sandbox {sandbox}") as api:
            events = api.get_diagnostic_events(sandbox, EVENTS_SCOPE).content or ""
    except SandboxError as e:
        # A server without the diagnostics API, or a sandbox already gone: the error as it was.
        log.info("Could not read the events of sandbox %s: %s", sandbox, e)
        return ""
    return diagnosed(events)


def diagnosed(events: str) -> str:
    """The first known cause among ``events`` (one per line), with the event that shows it."""
    for pattern, advice in CAUSES:
        for line in events.splitlines():
            if pattern.search(line):
                return f" {advice} The cluster's event: {quoted(line.strip(), 300)}."
    return ""
