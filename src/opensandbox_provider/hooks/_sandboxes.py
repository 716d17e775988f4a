"""The sandboxes a server lists, as the hook returns them: one typed summary each."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import OWNER_TAG

from opensandbox_provider._deployment import KEY as DEPLOYMENT_KEY
from opensandbox_provider._identity import KEYS, TaskInstanceIdentity, identity_metadata
from opensandbox_provider._kept import PARKED_KEY, kept_until
from opensandbox_provider._tags import CREATED_BY, PREFIX

if TYPE_CHECKING:
    from datetime import datetime

    from opensandbox.models.sandboxes import SandboxInfo
    from opensandbox.sync.manager import SandboxManagerSync

# Sandboxes asked for per request: a server answers a page this size quickly, and a listing
# of every sandbox on a busy server takes a few requests rather than one huge answer.
PAGE_SIZE = 100
UNMAPPED = -1


@dataclass(frozen=True)
class SandboxSummary:
    """One sandbox on the server, as a listing shows it."""

    id: str
    state: str
    """The server's lifecycle state: ``Pending``, ``Running``, ``Paused``, ``Failed``, ..."""
    image: str | None
    """The image it runs, ``None`` for one started from a snapshot."""
    created_at: datetime
    expires_at: datetime | None
    """When the server ends it unless it is renewed; ``None`` when it never expires."""
    identity: TaskInstanceIdentity | None
    """The task instance that created it; ``None`` for one made outside a task."""
    created_by_provider: bool
    """Whether this provider (or common-ai's toolset on it) created it."""
    provisioned: bool
    """Whether it was provisioned for other tasks to attach to, and so outlives its creator."""
    deployment: str | None
    """The Airflow deployment that created it; ``None`` for one made before it was stamped."""
    kept_until: datetime | None = None
    """Until when its task kept it for someone to look into; ``None`` for one not kept."""
    parked_for: str | None = None
    """The slot of a durable agent's task it is parked for, so that the task's next try adopts
    it; ``None`` for one not parked."""

    @classmethod
    def of(cls, info: SandboxInfo) -> SandboxSummary:
        metadata = info.metadata or {}
        return cls(
            id=info.id,
            state=info.status.state,
            image=info.image.image if info.image is not None else None,
            created_at=info.created_at,
            expires_at=info.expires_at,
            identity=TaskInstanceIdentity.read(metadata),
            created_by_provider=metadata.items() >= CREATED_BY.items(),
            provisioned=PREFIX + OWNER_TAG in metadata,
            deployment=metadata.get(DEPLOYMENT_KEY),
            kept_until=kept_until(metadata),
            parked_for=metadata.get(PARKED_KEY),
        )


@dataclass(frozen=True)
class SandboxQuery:
    """
    Which sandboxes a listing asks for. A field left ``None`` matches any value;
    ``map_index=-1`` matches only the sandboxes of unmapped tasks. ``deployment`` is not
    optional: nothing may act on another Airflow deployment's sandboxes by a task identity
    they happen to share.
    """

    deployment: str
    dag_id: str | None = None
    task_id: str | None = None
    run_id: str | None = None
    map_index: int | None = None
    try_number: int | None = None
    created_by_provider: bool = True
    states: Sequence[str] | None = None

    def metadata(self) -> dict[str, str]:
        """The metadata filter the server applies."""
        return {
            **(CREATED_BY if self.created_by_provider else {}),
            DEPLOYMENT_KEY: self.deployment,
            **identity_metadata({name: getattr(self, name) for name in KEYS}),
        }

    def matches(self, metadata: Mapping[str, str]) -> bool:
        """What the server's filter cannot say: an unmapped task's sandbox has no map index."""
        return self.map_index != UNMAPPED or KEYS["map_index"] not in metadata


def list_sandboxes(manager: SandboxManagerSync, query: SandboxQuery) -> Iterator[SandboxSummary]:
    """Every sandbox ``query`` matches, a page at a time."""
    from opensandbox.models.sandboxes import SandboxFilter

    page = 1
    while True:
        answer = manager.list_sandbox_infos(
            SandboxFilter(
                metadata=query.metadata() or None,
                states=list(query.states) if query.states else None,
                page=page,
                page_size=PAGE_SIZE,
            )
        )
        for info in answer.sandbox_infos:
            if query.matches(info.metadata or {}):
                yield SandboxSummary.of(info)
        if not answer.pagination.has_next_page:
            return
        page += 1
