"""What OpenSandbox left on the Docker engine: containers, volumes and networks it labels."""

import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# The server labels every sandbox container with its id, an egress sidecar with the sandbox it
# serves, and a runtime volume with its owner; a network would carry one of the same.
SANDBOX_LABEL = "opensandbox.io/id"
SIDECAR_LABEL = "opensandbox.io/egress-sidecar-for"
LABELS = (SANDBOX_LABEL, SIDECAR_LABEL, "opensandbox.io/volume-managed-by")
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
    return _settled(lambda: opensandbox_resources() - before)


def sandbox_containers(labels: Mapping[str, str]) -> set[Resource]:
    """The containers of the sandboxes whose metadata holds all of ``labels`` (the server
    makes metadata container labels), with their egress sidecars: one test's sandboxes, say
    those of an Airflow run by its identity labels, whatever other tests on the engine make
    meanwhile. A sidecar whose sandbox container is already gone is not among them; the
    run-wide leak check (tests/leak_check.py) still sees it, and any volume or network."""
    filters = [f"label={SANDBOX_LABEL}", *(f"label={k}={v}" for k, v in labels.items())]
    sandboxes = _labelled("container", ["ps", "-a"], filters, SANDBOX_LABEL)
    sidecars = _labelled("container", ["ps", "-a"], [f"label={SIDECAR_LABEL}"], SIDECAR_LABEL)
    ids = {sandbox for _, sandbox in sandboxes}
    return {r for r, _ in sandboxes} | {r for r, sandbox in sidecars if sandbox in ids}


def leftovers_of(labels: Mapping[str, str]) -> list[Resource]:
    """The containers of ``labels``' sandboxes still there after a short grace for deletions."""
    return _settled(lambda: sandbox_containers(labels))


def _settled(listing: Callable[[], set[Resource]]) -> list[Resource]:
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        found = listing()
        if not found or time.monotonic() > deadline:
            return sorted(found)
        time.sleep(0.5)


def _labelled(
    kind: str, command: list[str], filters: list[str], label: str
) -> list[tuple[Resource, str]]:
    """Each ``kind`` the filters (all of them) select, with its value of ``label``."""
    output = subprocess.run(
        ["docker", *command, *(a for f in filters for a in ("--filter", f))]
        + ["--format", f'{{{{.Names}}}}\t{{{{.Label "{label}"}}}}'],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = (line.split("\t") for line in output.splitlines() if line.strip())
    return [(Resource(kind, name), value) for name, value in rows]


def _names(kind: str, command: list[str], label: str) -> set[Resource]:
    output = subprocess.run(
        ["docker", *command, "--filter", f"label={label}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {Resource(kind, name) for name in output.split()}
