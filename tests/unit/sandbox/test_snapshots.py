"""Prepared environments decided without a server: names, reuse, refresh by age, the record
of use, refusals and cleanup."""

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

from opensandbox_provider import _variables
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.sandbox import (
    OpenSandboxBackend,
    _snapshot_use,
    _snapshots,
    delete_snapshot,
    prepare_snapshot,
)

NAME_INPUTS = {
    "deployment": "production",
    "base": "image:python:3.12-slim",
    "commands": ["make"],
    "env": {},
    "workdir": None,
}
# The deployment the suite's processes name themselves (tests/conftest.py).
DEPLOYMENT = "opensandbox-tests"


def test_the_same_inputs_name_the_same_snapshot() -> None:
    assert _snapshots.snapshot_name(**NAME_INPUTS) == _snapshots.snapshot_name(**NAME_INPUTS)


@pytest.mark.parametrize(
    "change",
    [
        {"deployment": "staging"},
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


def test_a_snapshot_name_is_the_deployment_then_the_hash_earlier_releases_gave() -> None:
    # The hash of the inputs is unchanged (credentials left out, names without them as they
    # were); the deployment before it is new in 1.1.0, so each snapshot is made once again.
    assert (
        _snapshots.snapshot_name(**NAME_INPUTS)
        == "airflow-env-production-"
        + hashlib.sha256(
            b'{"base":"image:python:3.12-slim","commands":["make"],"env":{},"version":1,'
            b'"workdir":null}'
        ).hexdigest()[:24]
    )


def test_a_snapshot_name_is_one_the_server_takes_and_a_reader_recognises() -> None:
    name = _snapshots.snapshot_name(**NAME_INPUTS)
    prefix = "airflow-env-production-"
    assert name.startswith(prefix) and len(name) == len(prefix) + 24


def test_a_deployment_knows_its_own_snapshots_and_no_other_deployments() -> None:
    production = _snapshots.snapshot_name(**NAME_INPUTS)
    # An id that begins with another's, and a name in the form of earlier releases.
    prod_eu = _snapshots.snapshot_name(**{**NAME_INPUTS, "deployment": "production-eu"})
    earlier = "airflow-env-" + production[-24:]

    assert _snapshots.is_prepared_by(production, "production")
    assert not _snapshots.is_prepared_by(prod_eu, "production")
    assert _snapshots.is_prepared_by(prod_eu, "production-eu")
    assert not _snapshots.is_prepared_by(production, "production-eu")
    for other in (earlier, production + "0", "airflow-env-production-by-hand", None):
        assert not _snapshots.is_prepared_by(other, "production")


class Server:
    """The snapshot calls of the lifecycle API, over a list of snapshots."""

    def __init__(self, snapshots: list[SimpleNamespace]) -> None:
        self.snapshots = snapshots
        self.calls: list[str] = []

    def list_snapshots(self, snapshot_filter) -> SimpleNamespace:
        self.calls.append("list")
        named = [
            s
            for s in self.snapshots
            if snapshot_filter.name in (None, s.name)
            and (not snapshot_filter.states or s.status.state in snapshot_filter.states)
        ]
        return SimpleNamespace(
            snapshot_infos=named, pagination=SimpleNamespace(has_next_page=False)
        )

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
    # Where every client of the server, the backend's and the snapshots' own, reads its config.
    monkeypatch.setattr(OpenSandboxHook, "connection_config", property(lambda self: object()))
    return stand_in


@pytest.fixture(autouse=True)
def variables(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The deployment's Airflow Variables, which this process has no metadata database for."""
    stored: dict[str, str] = {}

    def write(key: str, value: str, *, description: str) -> None:
        stored[key] = value

    monkeypatch.setattr(_variables, "read", stored.get)
    monkeypatch.setattr(_variables, "write", write)
    monkeypatch.setattr(_variables, "delete", lambda key: stored.pop(key, None))
    return stored


def name_for(backend: OpenSandboxBackend, commands: list[str]) -> str:
    return _snapshots.snapshot_name(
        deployment=DEPLOYMENT,
        base=f"image:{backend.image}",
        commands=commands,
        env={},
        workdir=backend.workdir,
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
    from opensandbox_provider._connection_config import ConnectionConfig

    config = ConnectionConfig(domain="127.0.0.1:1")
    monkeypatch.setattr(OpenSandboxBackend, "_connection_config", lambda self: config)

    with pytest.raises(Asked):
        OpenSandboxBackend(snapshot="snap-1").create(spec=SandboxSpec())
    assert asked["image"] is None and asked["snapshot_id"] == "snap-1"
    # Its policy is its own spec's: deny-all here, whatever the set-up had.
    assert asked["network_policy"].default_action == "deny"


def test_a_snapshot_older_than_max_age_is_made_again_and_the_old_one_is_left(server) -> None:
    backend = Backend(server)
    name = name_for(backend, ["make"])
    server.snapshots.append(snapshot("old", name, age=7200))

    assert prepare_snapshot(backend, ["make"], max_age=timedelta(hours=1)) == "new"
    assert backend.commands == ["make"]
    # Left for sandboxes that may still start from it, and for the maintenance cleanup.
    assert [s.id for s in server.snapshots if s.name == name] == ["old", "new"]
    assert not any(call.startswith("delete") for call in server.calls)


def test_a_snapshot_younger_than_max_age_is_reused_and_an_age_in_seconds_counts(server) -> None:
    backend = Backend(server)
    name = name_for(backend, ["make"])
    server.snapshots += [snapshot("stale", name, age=600), snapshot("fresh", name, age=60)]

    assert prepare_snapshot(backend, ["make"], max_age=300) == "fresh"
    # Without an age, the oldest ready one, as before.
    assert prepare_snapshot(backend, ["make"]) == "stale"
    assert backend.created == []


def test_two_runs_preparing_again_after_max_age_leave_one_new_snapshot(server) -> None:
    backend = Backend(server)
    name = name_for(backend, ["make"])
    server.snapshots.append(snapshot("old", name, age=7200))
    create = server.create_snapshot

    def create_while_a_rival_finished_first(sandbox: str, name: str) -> SimpleNamespace:
        server.snapshots.append(snapshot("rival", name, age=5))
        return create(sandbox, name)

    server.create_snapshot = create_while_a_rival_finished_first  # type: ignore[method-assign]

    # The rival's is the oldest made within the age: both runs take it, and this one's goes.
    assert prepare_snapshot(backend, ["make"], max_age=timedelta(hours=1)) == "rival"
    assert server.calls[-1] == "delete new"
    assert [s.id for s in server.snapshots if s.name == name] == ["old", "rival"]


@pytest.mark.parametrize(
    "max_age", [timedelta(0), timedelta(days=-1), -60, 0, float("nan"), float("inf"), True, "1d"]
)
def test_a_max_age_that_is_not_a_positive_time_is_refused_before_anything_runs(
    server, max_age
) -> None:
    backend = Backend(server)
    with pytest.raises(ValueError, match="max_age is .*give a positive timedelta"):
        prepare_snapshot(backend, ["make"], max_age=max_age)
    assert server.calls == [] and backend.created == []


def test_each_use_is_recorded_at_most_once_an_hour(server, variables) -> None:
    backend = Backend(server)
    name = name_for(backend, ["make"])
    server.snapshots.append(snapshot("snap-1", name, age=60))
    key = "opensandbox_snapshot_used.snap-1"

    prepare_snapshot(backend, ["make"])
    first = datetime.fromisoformat(variables[key])
    prepare_snapshot(backend, ["make"])
    assert datetime.fromisoformat(variables[key]) == first
    variables[key] = (first - timedelta(minutes=61)).isoformat()
    prepare_snapshot(backend, ["make"])

    # Written again once the last record was over an hour old.
    assert datetime.fromisoformat(variables[key]) >= first
    assert abs(datetime.now(UTC) - first) < timedelta(minutes=1)


def test_a_snapshot_made_now_is_recorded_used_by_its_id(server, variables) -> None:
    assert prepare_snapshot(Backend(server), ["make"]) == "new"
    assert set(variables) == {"opensandbox_snapshot_used.new"}


def test_a_use_that_cannot_be_recorded_is_logged_and_the_snapshot_still_returned(
    server, monkeypatch, caplog
) -> None:
    backend = Backend(server)
    server.snapshots.append(snapshot("snap-1", name_for(backend, ["make"])))

    def unwritable(key: str, value: str, *, description: str) -> None:
        raise OSError("the metadata database is read-only")

    monkeypatch.setattr(_variables, "write", unwritable)

    assert prepare_snapshot(backend, ["make"]) == "snap-1"
    assert "Could not record that snapshot snap-1" in caplog.text
    assert "the metadata database is read-only" in caplog.text


def test_deleting_a_snapshot_deletes_the_record_of_its_use(server, variables) -> None:
    server.snapshots.append(snapshot("snap-1", "any"))
    variables[_snapshot_use.key("snap-1")] = datetime.now(UTC).isoformat()

    delete_snapshot(Backend(server), "snap-1")

    assert variables == {}
    assert server.snapshots == []
