"""
What a sandbox is created with, gathered once per create from the backend's arguments and the
spec: the one value the cold create, a server pool and a warm pool read, so that none of them
reads the backend or maps the spec to the network policy or the environment again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.providers.common.ai.sandbox.base import SandboxSpec
    from opensandbox.models.sandboxes import NetworkPolicy

    from opensandbox_provider.sandbox._volumes import Mount


@dataclass(frozen=True)
class CreationTemplate:
    """
    One sandbox's creation inputs: its image or snapshot, resources, environment, policy,
    volumes, lease and the metadata that says whose it is.
    """

    image: str
    """The backend's image, which a snapshot replaces (see :attr:`pulled_image`)."""
    snapshot: str | None
    cpu: str
    memory: str
    resources: Mapping[str, str]
    """Limits beside ``cpu`` and ``memory``."""
    requests: Mapping[str, str]
    """What a Kubernetes scheduler is asked for, at most the limits."""
    registry_conn_id: str | None
    spec: SandboxSpec | None
    env: dict[str, str] | None
    policy: NetworkPolicy | None
    volumes: tuple[Mount, ...]
    lease: float
    """Seconds the server keeps the sandbox after its last renewal: the backend's lease."""
    ready_timeout: float
    conn_id: str | None
    """The connection naming the server, which a warm pool must share."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    """Stamped on the sandbox: whose it is, its name, its lease, and its tags if provisioned."""

    def stamped(self, metadata: Mapping[str, str]) -> CreationTemplate:
        """The same template, the sandbox to be stamped with ``metadata``."""
        return replace(self, metadata=dict(metadata))

    @property
    def pulled_image(self) -> str | None:
        """The image the server pulls: none for a snapshot, which is on the server already."""
        return None if self.snapshot else self.image

    @property
    def made_from(self) -> str:
        """What the sandbox's files come from, as the log says it."""
        return f"snapshot {self.snapshot}" if self.snapshot else f"image {self.image}"

    @property
    def limits(self) -> dict[str, str]:
        """The CPU and memory limits, as the create's ``resource`` names them."""
        return {"cpu": self.cpu, "memory": self.memory}
