"""What snapshots a test run left: the servers' snapshot records and the images behind them.

The Docker runtime keeps each snapshot twice, as a row in its server's store and as an image
in the engine's ``opensandbox-snapshots`` repository; a delete removes both, so either one
outliving the run is a leak. Images are shared by the stack's servers, records are not.
"""

from __future__ import annotations

import subprocess
import time

from dev.stack.leaks import SETTLE_SECONDS, Resource
from dev.stack.state import StackState

# The repository the Docker runtime commits every snapshot to, tagged with its id.
SNAPSHOT_REPOSITORY = "opensandbox-snapshots"


def snapshot_resources(state: StackState) -> set[Resource]:
    found = {Resource("snapshot image", tag) for tag in _image_tags()}
    for name, server in state.servers.items():
        found |= {Resource(f"snapshot on {name}", id_) for id_ in _snapshot_ids(server)}
    return found


def snapshot_leftovers(state: StackState, before: set[Resource]) -> list[Resource]:
    """What appeared since ``before`` and is still there after the engine's grace."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        new = snapshot_resources(state) - before
        if not new or time.monotonic() > deadline:
            return sorted(new)
        time.sleep(0.5)


def _image_tags() -> set[str]:
    output = subprocess.run(
        ["docker", "image", "ls", SNAPSHOT_REPOSITORY, "--format", "{{.Tag}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(output.split())


def _snapshot_ids(server) -> set[str]:
    from opensandbox import SandboxManagerSync
    from opensandbox.models.sandboxes import SnapshotFilter

    manager = SandboxManagerSync.create(server.connection_config())
    ids: set[str] = set()
    try:
        page_number = 1
        while True:
            page = manager.list_snapshots(SnapshotFilter(page=page_number, page_size=100))
            ids |= {info.id for info in page.snapshot_infos}
            if not page.pagination.has_next_page:
                return ids
            page_number += 1
    finally:
        manager.close()
