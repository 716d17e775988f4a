"""Prepared environments decided without a server: names, reuse, refusals and cleanup."""

from __future__ import annotations

import copy
import hashlib
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from airflow.providers.common.ai.sandbox.base import (
    SandboxExecResult,
    SandboxSpec,
    SandboxTerminalError,
)
from opensandbox.exceptions import SandboxApiException

from opensandbox_provider.sandbox import OpenSandboxBackend, _snapshots, prepare_snapshot

NAME_INPUTS = {"base": "image:python:3.12-slim", "commands": ["make"], "env": {}, "workdir": None}


def test_the_same_inputs_name_the_same_snapshot() -> None:
    assert _snapshots.snapshot_name(**NAME_INPUTS) == _snapshots.snapshot_name(**NAME_INPUTS)


@pytest.mark.parametrize(
    "change",
    [
        {"base": "image:python:3.13-slim"},
        {"base": "snapshot:abc"},
        {"commands": ["make", "make install"]},
        {"commands": ["make "]},
        {"env": {"A": "1"}},
        {"workdir": "/home/agent/work"},
    ],
)
def test_any_change_to_the_inputs_names_another_snapshot(change) -> None:
    assert _snapshots.snapshot_name(**{**NAME_INPUTS, **change}) != _snapshots.snapshot_name(
        **NAME_INPUTS
    )


INDEX = "pip install --index-url https://deploy:{}@pypi.example/simple pandas"


def test_a_credential_in_a_commands_url_is_not_hashed_into_the_name() -> None:
    # The name is shown to every holder of the server's API key: a digest of the token in
    # it could be guessed offline. A rotated token finds the snapshot the old one made.
    named = [
        _snapshots.snapshot_name(**{**NAME_INPUTS, "commands": [INDEX.format(token)]})
        for token in ("first-token-value", "rotated-token-value")
    ]
    hidden = _snapshots.snapshot_name(**{**NAME_INPUTS, "commands": [INDEX.format("***")]})
    assert named == [hidden, hidden]


def test_a_snapshot_name_without_credentials_is_the_one_earlier_releases_gave() -> None:
    # Snapshots prepared before credentials were left out are still found.
    assert (
        _snapshots.snapshot_name(**NAME_INPUTS)
        == "airflow-env-"
        + hashlib.sha256(
            b'{"base":"image:python:3.12-slim","commands":["make"],"env":{},"version":1,'
            b'"workdir":null}'
        ).hexdigest()[:24]
    )


def test_a_snapshot_name_is_one_the_server_takes_and_a_reader_recognises() -> None:
    name = _snapshots.snapshot_name(**NAME_INPUTS)
    assert name.startswith("airflow-env-") and len(name) == len("airflow-env-") + 24


class Server:
    """The snapshot calls of the lifecycle API, over a list of snapshots."""

    def __init__(self, snapshots: list[SimpleNamespace]) -> None:
        self.snapshots = snapshots
        self.calls: list[str] = []

    def list_snapshots(self, snapshot_filter) -> SimpleNamespace:
        self.calls.append("list")
        named = [s for s in self.snapshots if s.name == snapshot_filter.name]
        return SimpleNamespace(snapshot_infos=named)

    def create_snapshot(self, sandbox: str, name: str) -> SimpleNamespace:
        self.calls.append(f"snapshot {sandbox}")
        made = snapshot("new", name, state="Ready")
        self.snapshots.append(made)
        return made

    def get_snapshot(self, snapshot_id: str) -> SimpleNamespace:
        return next(s for s in self.snapshots if s.id == snapshot_id)

    def delete_snapshot(self, snapshot_id: str) -> None:
        self.calls.append(f"delete {snapshot_id}")
        if not any(s.id == snapshot_id for s in self.snapshots):
            raise Missing
        self.snapshots = [s for s in self.snapshots if s.id != snapshot_id]

    def close(self) -> None:
        pass


class Asked(Exception):
    """Ends a create once the request is seen."""


class Missing(SandboxApiException):
    """What the SDK raises when the server answers 404."""

    def __init__(self) -> None:
        super().__init__("Get snapshot failed: HTTP 404", status_code=404)


def snapshot(id_: str, name: str, *, state: str = "Ready", age: float = 0) -> SimpleNamespace:
    return SimpleNamespace(
        id=id_,
        name=name,
        created_at=datetime.now(UTC) - timedelta(seconds=age),
        status=SimpleNamespace(state=state, reason="why", message="what"),
    )


class Backend(OpenSandboxBackend):
    """A backend whose sandboxes are a list, and whose commands exit as ``exits`` says."""

    def __init__(self, server: Server, *, exits: int = 0, **arguments) -> None:
        super().__init__(**arguments)
        self.server = server
        self.exits = exits
        self.created: list[SandboxSpec | None] = []
        self.destroyed: list[str] = []
        self.commands: list[str] = []

    def create(self, *, spec=None) -> str:
        self.created.append(spec)
        return "sb-set-up"

    def run_command(self, sandbox, command, *, timeout, max_output_bytes, on_output=None):
        self.commands.append(command)
        return SandboxExecResult(exit_code=self.exits, stdout="", stderr="no such target")

    def destroy(self, sandbox: str) -> None:
        self.destroyed.append(sandbox)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    from opensandbox.sync.manager import SandboxManagerSync

    stand_in = Server([])
    monkeypatch.setattr(SandboxManagerSync, "create", staticmethod(lambda config: stand_in))
    monkeypatch.setattr(OpenSandboxBackend, "_connection_config", lambda self: object())
    return stand_in


def name_for(backend: OpenSandboxBackend, commands: list[str]) -> str:
    return _snapshots.snapshot_name(
        base=f"image:{backend.image}", commands=commands, env={}, workdir=backend.workdir
    )


def test_a_ready_snapshot_of_the_same_inputs_is_reused_and_nothing_runs(server) -> None:
    backend = Backend(server)
    name = name_for(backend, ["make"])
    server.snapshots += [snapshot("newer", name), snapshot("older", name, age=60)]

    assert prepare_snapshot(backend, ["make"]) == "older"
    assert backend.created == [] and backend.commands == []


def test_a_first_preparation_runs_the_set_up_snapshots_and_destroys_its_sandbox(server) -> None:
    backend = Backend(server)

    assert prepare_snapshot(backend, ["make", "make install"]) == "new"
    assert backend.commands == ["make", "make install"]
    # Made, then looked for again, in case a run preparing at the same time made one first.
    assert server.calls[-2:] == ["snapshot sb-set-up", "list"]
    assert backend.destroyed == ["sb-set-up"]
    # The set-up's network is open unless the caller says otherwise.
    assert backend.created == [SandboxSpec(block_network=False)]


def test_a_run_that_finds_a_rivals_older_snapshot_after_making_its_own_deletes_its_own(
    server,
) -> None:
    backend = Backend(server)
    name = name_for(backend, ["make"])
    create = server.create_snapshot

    def create_while_a_rival_finished_first(sandbox: str, name: str) -> SimpleNamespace:
        server.snapshots.append(snapshot("rival", name, age=5))
        return create(sandbox, name)

    server.create_snapshot = create_while_a_rival_finished_first  # type: ignore[method-assign]

    assert prepare_snapshot(backend, ["make"]) == "rival"
    assert server.calls[-1] == "delete new"
    assert [s.id for s in server.snapshots if s.name == name] == ["rival"]


def test_a_failed_set_up_command_stops_before_the_snapshot_and_destroys_the_sandbox(
    server,
) -> None:
    backend = Backend(server, exits=2)

    with pytest.raises(SandboxTerminalError, match="'make' exited with 2.*no such target"):
        prepare_snapshot(backend, ["make", "make install"])
    assert backend.commands == ["make"]
    assert not any(call.startswith("snapshot") for call in server.calls)
    assert backend.destroyed == ["sb-set-up"]


def test_a_failed_set_up_quotes_its_command_and_stderr_without_a_urls_credentials(
    server, monkeypatch
) -> None:
    backend = Backend(server, exits=1)
    secret = "index-token-0123"
    echoed = f"ERROR: 401 from https://pypi.example/simple/pandas/?token={secret}"
    monkeypatch.setattr(
        Backend,
        "run_command",
        lambda self, *a, **k: SandboxExecResult(exit_code=1, stdout="", stderr=echoed),
    )
    with pytest.raises(SandboxTerminalError) as failed:
        prepare_snapshot(backend, [INDEX.format(secret)])
    assert secret not in str(failed.value)
    assert "https://deploy:***@pypi.example/simple" in str(failed.value)
    assert "?token=***" in str(failed.value)


def test_a_snapshot_the_server_fails_is_reported_with_its_reason(server, monkeypatch) -> None:
    backend = Backend(server)
    failed = snapshot("bad", "x", state="Failed")
    monkeypatch.setattr(server, "create_snapshot", lambda sandbox, name: failed)
    server.snapshots.append(failed)

    with pytest.raises(SandboxTerminalError, match="could not make snapshot bad: why: what"):
        prepare_snapshot(backend, ["make"])
    assert backend.destroyed == ["sb-set-up"]


def test_a_set_up_provisioned_for_a_task_is_refused(server) -> None:
    with pytest.raises(ValueError, match="drop SandboxSpec.owner"):
        prepare_snapshot(Backend(server), ["make"], spec=SandboxSpec(owner="dag/run"))


@pytest.mark.parametrize("commands", [[], [""], ["make", "  "]])
def test_a_set_up_without_commands_is_refused(server, commands) -> None:
    with pytest.raises(ValueError, match="non-empty list"):
        prepare_snapshot(Backend(server), commands)


def test_deleting_a_snapshot_already_gone_is_no_failure(server) -> None:
    _snapshots.delete_snapshot(Backend(server), "gone")

    assert server.calls == ["delete gone"]


@pytest.mark.parametrize("value", ["", "  ", 7])
def test_a_snapshot_that_is_not_an_id_is_refused_when_the_dag_is_parsed(value) -> None:
    with pytest.raises(ValueError, match="snapshot must be the id of a snapshot"):
        OpenSandboxBackend(snapshot=value)


def test_a_backend_from_a_snapshot_keeps_it_through_airflows_deep_copy() -> None:
    assert copy.deepcopy(OpenSandboxBackend(snapshot="snap-1")).snapshot == "snap-1"


def test_a_sandbox_from_a_snapshot_is_created_from_it_and_not_from_the_image(
    monkeypatch,
) -> None:
    from opensandbox import SandboxSync

    asked: dict = {}

    def create(image, **arguments):
        asked.update(arguments, image=image)
        raise Asked

    monkeypatch.setattr(SandboxSync, "create", staticmethod(create))
    monkeypatch.setattr(OpenSandboxBackend, "_connection_config", lambda self: object())

    with pytest.raises(Asked):
        OpenSandboxBackend(snapshot="snap-1").create(spec=SandboxSpec())
    assert asked["image"] is None and asked["snapshot_id"] == "snap-1"
    # Its policy is its own spec's: deny-all here, whatever the set-up had.
    assert asked["network_policy"].default_action == "deny"
