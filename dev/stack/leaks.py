"""What OpenSandbox left on the Docker engine: containers, volumes and networks it labels."""

import subprocess
import time
from dataclasses import dataclass

# The server labels every sandbox container with its id, an egress sidecar with the sandbox it
# serves, and a runtime volume with its owner; a network would carry one of the same.
LABELS = (
    "opensandbox.io/id",
    "opensandbox.io/egress-sidecar-for",
    "opensandbox.io/volume-managed-by",
)
# Destroy returns before Docker has finished removing a sidecar and its volume.
SETTLE_SECONDS = 10.0


@dataclass(frozen=True, order=True)
class Resource:
    kind: str  # container, volume or network
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def opensandbox_resources() -> set[Resource]:
    found = set()
    for label in LABELS:
        found |= _names("container", ["ps", "-a", "--format", "{{.Names}}"], label)
        found |= _names("volume", ["volume", "ls", "--format", "{{.Name}}"], label)
        found |= _names("network", ["network", "ls", "--format", "{{.Name}}"], label)
    return found


def leftovers(before: set[Resource]) -> list[Resource]:
    """What appeared since ``before`` and is still there after a short grace for deletions."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        new = opensandbox_resources() - before
        if not new or time.monotonic() > deadline:
            return sorted(new)
        time.sleep(0.5)


def _names(kind: str, command: list[str], label: str) -> set[Resource]:
    output = subprocess.run(
        ["docker", *command, "--filter", f"label={label}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {Resource(kind, name) for name in output.split()}
