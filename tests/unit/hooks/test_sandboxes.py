"""The hook's listing of sandboxes: the filter the server gets, the pages, the summaries."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox.base import OWNER_TAG
from opensandbox.models.sandboxes import (
    PagedSandboxInfos,
    PaginationInfo,
    SandboxImageSpec,
    SandboxInfo,
    SandboxStatus,
)

from opensandbox_provider import _tags
from opensandbox_provider._deployment import KEY as DEPLOYMENT_KEY
from opensandbox_provider._identity import KEYS, TaskInstanceIdentity
from opensandbox_provider.hooks._sandboxes import SandboxQuery, SandboxSummary, list_sandboxes

RUN_ID = "scheduled__2026-01-01T00:00:00+00:00"
OURS, THEIRS = "production", "staging"
CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def info(sandbox: str, metadata: dict[str, str], *, state: str = "Running") -> SandboxInfo:
    return SandboxInfo(
        id=sandbox,
        status=SandboxStatus(state=state),
        entrypoint=["tail", "-f", "/dev/null"],
        created_at=CREATED,
        image=SandboxImageSpec("python:3.12-slim"),
        metadata=metadata,
    )


class PagedServer:
    """A lifecycle API that answers ``page_size`` sandboxes a page, recording each filter."""

    def __init__(self, infos: list[SandboxInfo], page_size: int) -> None:
        self.infos, self.page_size, self.filters = infos, page_size, []

    def list_sandbox_infos(self, filter) -> PagedSandboxInfos:
        self.filters.append(filter)
        start = (filter.page - 1) * self.page_size
        page = self.infos[start : start + self.page_size]
        pages = -(-len(self.infos) // self.page_size)
        return PagedSandboxInfos(
            sandbox_infos=page,
            pagination=PaginationInfo(
                page=filter.page,
                page_size=self.page_size,
                total_items=len(self.infos),
                total_pages=pages,
                has_next_page=filter.page < pages,
            ),
        )


def test_the_server_filters_on_the_deployment_the_identity_labels_and_the_creator():
    query = SandboxQuery(OURS, dag_id="d", run_id=RUN_ID, map_index=2, states=["Running"])
    identity = TaskInstanceIdentity("d", "t", RUN_ID, map_index=2)
    assert query.metadata() == {
        "created-by": "airflow",
        DEPLOYMENT_KEY: OURS,
        KEYS["dag_id"]: "d",
        KEYS["run_id"]: identity.metadata()[KEYS["run_id"]],
        KEYS["map_index"]: "2",
    }
    assert SandboxQuery(OURS, created_by_provider=False).metadata() == {DEPLOYMENT_KEY: OURS}


def test_every_page_is_read_and_map_index_minus_one_keeps_unmapped_tasks_only():
    unmapped = TaskInstanceIdentity("d", "t", RUN_ID, try_number=1).metadata()
    mapped = TaskInstanceIdentity("d", "t", RUN_ID, map_index=0, try_number=1).metadata()
    infos = [info(f"sb-{n}", unmapped if n % 2 else mapped) for n in range(5)]
    server = PagedServer(infos, page_size=2)
    found = list(list_sandboxes(server, SandboxQuery(OURS, dag_id="d", map_index=-1)))
    assert [summary.id for summary in found] == ["sb-1", "sb-3"]
    assert [f.page for f in server.filters] == [1, 2, 3]
    assert KEYS["map_index"] not in server.filters[0].metadata


def test_a_summary_carries_the_identity_and_what_made_the_sandbox():
    identity = TaskInstanceIdentity("d", "t", RUN_ID, try_number=2)
    owner = _tags.encode({OWNER_TAG: "d/run"})
    provisioned = SandboxSummary.of(
        info("sb-1", {"created-by": "airflow", **identity.metadata(), **owner})
    )
    assert provisioned.identity == identity and provisioned.provisioned
    assert provisioned.created_by_provider and provisioned.image == "python:3.12-slim"
    stranger = SandboxSummary.of(info("sb-2", {}, state="Paused"))
    assert stranger.identity is None and not stranger.created_by_provider
    assert not stranger.provisioned and stranger.state == "Paused"
    assert stranger.created_at == CREATED and stranger.expires_at is None


def test_the_hooks_listing_asks_the_server_only_for_this_deployments_sandboxes(monkeypatch):
    from contextlib import contextmanager

    from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

    server = PagedServer([], page_size=10)

    @contextmanager
    def manager(self):
        yield server

    monkeypatch.setattr(OpenSandboxHook, "_manager", manager)
    monkeypatch.setattr(OpenSandboxHook, "server_url", "http://server")
    for deployment in (OURS, THEIRS):
        monkeypatch.setenv("AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID", deployment)
        OpenSandboxHook().list_sandboxes(dag_id="d", task_id="t", run_id=RUN_ID, map_index=-1)
        OpenSandboxHook().list_sandboxes(created_by_provider=False)
    assert [f.metadata[DEPLOYMENT_KEY] for f in server.filters] == [OURS, OURS, THEIRS, THEIRS]


def test_a_summary_says_which_deployment_made_the_sandbox_and_none_for_an_unstamped_one():
    stamped = SandboxSummary.of(info("sb-1", {"created-by": "airflow", DEPLOYMENT_KEY: OURS}))
    older = SandboxSummary.of(info("sb-2", {"created-by": "airflow"}))
    assert stamped.deployment == OURS and older.deployment is None
