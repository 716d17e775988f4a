"""The maintenance cleanup's removal of unused snapshots, decided without a server: whose
snapshots it judges, which it leaves, the age it is given, and the record it deletes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from opensandbox.exceptions import SandboxApiException

from opensandbox_provider import _variables
from opensandbox_provider.maintenance import OpenSandboxCleanupOperator, cleanup_dag
from opensandbox_provider.maintenance._unused_snapshots import (
    DEFAULT_UNUSED_SNAPSHOT_AGE,
    checked_unused_age,
    remove_unused_snapshots,
)
from opensandbox_provider.sandbox import _snapshot_use, _snapshots
from opensandbox_provider.sandbox._lifecycle import Lifecycle

NOW = datetime(2026, 3, 1, tzinfo=UTC)
WEEK = timedelta(days=7)


def name(deployment: str, command: str) -> str:
    return _snapshots.snapshot_name(
        deployment=deployment,
        base="image:python:3.12-slim",
        commands=[command],
        env={},
        workdir=None,
    )


def snapshot(id_: str, name: str | None, *, days: float, state: str = "Ready") -> SimpleNamespace:
    return SimpleNamespace(
        id=id_,
        name=name,
        created_at=NOW - timedelta(days=days),
        status=SimpleNamespace(state=state),
    )


def sandbox(snapshot_id: str | None, state: str = "Running") -> SimpleNamespace:
    return SimpleNamespace(snapshot_id=snapshot_id, status=SimpleNamespace(state=state))


class Conflict(SandboxApiException):
    """What the SDK raises when the server refuses to delete an image a container uses."""

    def __init__(self) -> None:
        super().__init__("Delete snapshot failed: HTTP 409", status_code=409)


class Server:
    """The lifecycle API's listings and snapshot delete, over lists; one page each."""

    def __init__(self, snapshots: list, sandboxes: list, *, refused: frozenset = frozenset()):
        self.snapshots = snapshots
        self.sandboxes = sandboxes
        self.refused = refused
        self.deleted: list[str] = []

    def list_snapshots(self, snapshot_filter) -> SimpleNamespace:
        return SimpleNamespace(
            snapshot_infos=list(self.snapshots), pagination=SimpleNamespace(has_next_page=False)
        )

    def list_sandbox_infos(self, sandbox_filter) -> SimpleNamespace:
        return SimpleNamespace(
            sandbox_infos=list(self.sandboxes), pagination=SimpleNamespace(has_next_page=False)
        )

    def delete_snapshot(self, snapshot_id: str) -> None:
        if snapshot_id in self.refused:
            raise Conflict
        self.deleted.append(snapshot_id)

    def close(self) -> None:
        pass


@pytest.fixture
def variables(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    stored: dict[str, str] = {}
    monkeypatch.setattr(_variables, "read", stored.get)
    monkeypatch.setattr(_variables, "delete", lambda key: stored.pop(key, None))
    return stored


def lifecycle_over(server: Server, monkeypatch: pytest.MonkeyPatch) -> Lifecycle:
    from opensandbox.sync.manager import SandboxManagerSync

    monkeypatch.setattr(SandboxManagerSync, "create", staticmethod(lambda config: server))
    return Lifecycle(lambda: object())  # type: ignore[arg-type, return-value]


def test_only_this_deployments_snapshots_unused_for_the_age_are_removed(
    monkeypatch, variables
) -> None:
    ours, theirs = "production", "staging"
    server = Server(
        [
            snapshot("unused", name(ours, "a"), days=30),
            snapshot("used-lately", name(ours, "b"), days=30),
            snapshot("made-lately", name(ours, "c"), days=2),
            snapshot("being-made", name(ours, "d"), days=30, state="Creating"),
            snapshot("running-from", name(ours, "e"), days=30),
            snapshot("failed", name(ours, "f"), days=30, state="Failed"),
            snapshot("theirs", name(theirs, "a"), days=30),
            snapshot("earlier-release", "airflow-env-" + name(ours, "a")[-24:], days=30),
            snapshot("by-hand", None, days=30),
        ],
        [sandbox("running-from"), sandbox("theirs", state="Terminated"), sandbox(None)],
    )
    for id_, days in (("unused", 8), ("used-lately", 1), ("theirs", 30)):
        variables[_snapshot_use.key(id_)] = (NOW - timedelta(days=days)).isoformat()

    removed = remove_unused_snapshots(
        lifecycle_over(server, monkeypatch), deployment=ours, unused_for=WEEK, now=NOW
    )

    assert removed == server.deleted == ["unused", "failed"]
    # The record goes with its snapshot; the others' stay.
    assert set(variables) == {_snapshot_use.key("used-lately"), _snapshot_use.key("theirs")}


def test_a_snapshot_the_server_will_not_remove_is_logged_and_the_rest_still_removed(
    monkeypatch, variables, caplog
) -> None:
    server = Server(
        [
            snapshot("in-use-since", name("production", "a"), days=30),
            snapshot("unused", name("production", "b"), days=30),
        ],
        [],
        refused=frozenset({"in-use-since"}),
    )

    removed = remove_unused_snapshots(
        lifecycle_over(server, monkeypatch), deployment="production", unused_for=WEEK, now=NOW
    )

    assert removed == ["unused"]
    assert "Could not remove snapshot in-use-since" in caplog.text


def test_the_default_age_is_a_week_and_none_removes_nothing() -> None:
    assert DEFAULT_UNUSED_SNAPSHOT_AGE == timedelta(days=7)
    assert OpenSandboxCleanupOperator(task_id="cleanup").unused_snapshot_age == WEEK
    assert (
        OpenSandboxCleanupOperator(task_id="c", unused_snapshot_age=None).unused_snapshot_age
        is None
    )
    assert checked_unused_age(3 * 3600) == timedelta(hours=3)


@pytest.mark.parametrize(
    ("age", "message"),
    [
        (timedelta(days=-7), "give a positive timedelta"),
        (-1, "give a positive timedelta"),
        (0, "give a positive timedelta"),
        (True, "give a positive timedelta"),
        (timedelta(minutes=30), "give at least 2 hours"),
    ],
)
def test_an_unused_snapshot_age_that_could_remove_a_used_snapshot_fails_when_parsed(
    age, message
) -> None:
    with pytest.raises(ValueError, match=f"unused_snapshot_age is .*{message}"):
        OpenSandboxCleanupOperator(task_id="cleanup", unused_snapshot_age=age)
    with pytest.raises(ValueError, match=message):
        cleanup_dag("cleanup", unused_snapshot_age=age)


def test_the_cleanup_dag_hands_its_unused_snapshot_age_to_its_task() -> None:
    (task,) = cleanup_dag("cleanup", unused_snapshot_age=timedelta(days=30)).tasks
    assert task.unused_snapshot_age == timedelta(days=30)
