"""What OpenSandboxBackend decides before it talks to any server."""

from __future__ import annotations

import copy
import gc
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxSpec, SandboxTerminalError

from opensandbox_provider import _tags
from opensandbox_provider._sdk import INSTALL_COMMAND
from opensandbox_provider.sandbox import OpenSandboxBackend

# No connection of this name exists, so any step that reached for the server would fail
# with a message about the connection instead of the one a test expects.
NOWHERE = "no_connection_defined_anywhere"


def test_the_backend_is_named_like_common_ais_so_toolset_ids_do_not_change() -> None:
    assert OpenSandboxBackend.name == "opensandbox"


def test_the_defaults_match_common_ais_built_in_backend() -> None:
    backend = OpenSandboxBackend()
    assert backend.opensandbox_conn_id == "opensandbox_default"
    assert (backend.image, backend.cpu, backend.memory) == ("python:3.12-slim", "1", "2Gi")
    assert (backend.sandbox_timeout, backend.ready_timeout) == (3600.0, 120.0)
    assert backend.use_server_proxy is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"image": ""}, "image"),
        ({"cpu": " "}, "cpu"),
        ({"memory": ""}, "memory"),
        ({"sandbox_timeout": 0}, "sandbox_timeout"),
        ({"sandbox_timeout": 59}, "at least 60 seconds"),
        ({"ready_timeout": float("inf")}, "ready_timeout"),
    ],
)
def test_unusable_arguments_are_refused_when_the_dag_is_parsed(arguments, message) -> None:
    with pytest.raises(ValueError, match=message):
        OpenSandboxBackend(**arguments)


CHILD = textwrap.dedent(
    """
    import sys

    class NoSdk:
        def find_spec(self, name, path=None, target=None):
            if name == "opensandbox" or name.startswith("opensandbox."):
                raise ImportError(f"No module named {name!r}")

    sys.meta_path.insert(0, NoSdk())
    from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
    from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
    from opensandbox_provider.sandbox import OpenSandboxBackend

    backend = OpenSandboxBackend("opensandbox_default")
    OpenSandboxHook("opensandbox_default")
    assert "opensandbox" not in sys.modules
    try:
        backend.create(spec=SandboxSpec(block_network=False))
    except SandboxTerminalError as error:
        print(error)
    """
)


def test_without_the_sdk_the_package_imports_and_create_says_how_to_install_it() -> None:
    env = {"AIRFLOW_CONN_OPENSANDBOX_DEFAULT": '{"conn_type": "opensandbox", "host": "h"}'}
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert child.returncode == 0, child.stderr
    assert INSTALL_COMMAND in child.stdout
    assert INSTALL_COMMAND == 'pip install "airflow-provider-opensandbox[opensandbox]"'


def test_a_spec_the_backend_cannot_enforce_is_refused_before_anything_is_provisioned() -> None:
    spec = SandboxSpec(block_network=False, allow_egress_to_cidrs=["203.0.113.0/24"])
    with pytest.raises(SandboxTerminalError, match="allow_egress_to_cidrs"):
        OpenSandboxBackend(NOWHERE).create(spec=spec)


@pytest.mark.parametrize("env", [{"A": 1}, {"": "x"}, {"A=B": "x"}, {3: "x"}])
def test_an_environment_that_is_not_names_to_strings_is_refused(env) -> None:
    with pytest.raises(SandboxTerminalError, match="SandboxSpec.env"):
        OpenSandboxBackend(NOWHERE).create(spec=SandboxSpec(block_network=False, env=env))


@pytest.mark.parametrize("handle", ["", "None", None])
def test_destroying_what_is_not_a_handle_does_nothing(handle) -> None:
    OpenSandboxBackend(NOWHERE).destroy(handle)


def test_a_tag_utf8_cannot_hold_is_a_sandbox_error_not_a_raw_one(monkeypatch) -> None:
    backend = OpenSandboxBackend(NOWHERE)
    monkeypatch.setattr(backend, "_info", lambda sandbox, doing: SimpleNamespace(metadata={}))
    with pytest.raises(SandboxError, match="Could not write the tags .*lone surrogate"):
        backend.write_tags("sandbox-1", {"holder": "task\ud800"})


def test_an_owner_utf8_cannot_hold_fails_creation_before_anything_is_provisioned() -> None:
    # Terminal, as every failure of create is; and before the server is asked for anything.
    with pytest.raises(SandboxTerminalError, match="Could not create a sandbox: .*lone surrogate"):
        OpenSandboxBackend(NOWHERE).create(spec=SandboxSpec(owner="dag/\udc80"))


class Lifecycle:
    """A stand-in for the SDK's lifecycle client: one sandbox, whose expiry and lease are set."""

    def __init__(self, made: list[Lifecycle], *, left: float, metadata: dict[str, str]) -> None:
        made.append(self)
        self.expires_at = datetime.now(UTC) + timedelta(seconds=left)
        self.metadata = metadata
        self.renewals: list[float] = []
        self.closed = False

    def get_sandbox_info(self, sandbox: str) -> SimpleNamespace:
        return SimpleNamespace(
            metadata=dict(self.metadata),
            expires_at=self.expires_at,
            status=SimpleNamespace(state="Running"),
        )

    def patch_sandbox_metadata(self, sandbox: str, changes: dict) -> None:
        self.metadata.update({k: v for k, v in changes.items() if v is not None})

    def renew_sandbox(self, sandbox: str, timeout: timedelta) -> None:
        self.renewals.append(timeout.total_seconds())
        self.expires_at = datetime.now(UTC) + timeout

    def kill_sandbox(self, sandbox: str) -> None:
        self.killed = True

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def lifecycles(monkeypatch: pytest.MonkeyPatch):
    """Every lifecycle client a backend makes, each for a sandbox with ``settings``' expiry."""
    from opensandbox.sync.manager import SandboxManagerSync

    made: list[Lifecycle] = []
    settings: dict = {"left": 3600.0, "metadata": {}}
    monkeypatch.setattr(
        SandboxManagerSync, "create", staticmethod(lambda config: Lifecycle(made, **settings))
    )
    monkeypatch.setattr(OpenSandboxBackend, "_connection_config", lambda self: object())
    return made, settings


def test_one_backend_makes_one_lifecycle_client_and_closes_it_when_it_is_done(lifecycles):
    made, _ = lifecycles
    backend = OpenSandboxBackend(NOWHERE)
    for _ in range(3):
        backend.read_tags("sb-1")
        backend.renew("sb-1")
    backend.write_tags("sb-1", {"note": "kept"})
    backend.destroy("sb-1")

    assert len(made) == 1
    assert not made[0].closed
    del backend
    gc.collect()
    assert made[0].closed


def test_a_renewal_never_moves_the_expiry_earlier_than_the_server_has_it(lifecycles):
    made, settings = lifecycles
    # A creator gave the sandbox two hours and stamped no lease (an older backend, say).
    settings["left"] = 7200.0
    backend = OpenSandboxBackend(NOWHERE, sandbox_timeout=600)

    assert backend.renew("sb-1")
    assert made[0].renewals == []


def test_a_renewal_uses_the_lease_its_creator_stamped(lifecycles):
    made, settings = lifecycles
    settings.update(left=30.0, metadata={_tags.LEASE_KEY: "7200"})
    backend = OpenSandboxBackend(NOWHERE, sandbox_timeout=600)

    assert backend.renew("sb-1")
    assert made[0].renewals == [7200.0]


def test_a_deep_copy_is_a_fresh_backend_with_the_same_settings() -> None:
    # Airflow 3.0 deep-copies a task, its toolsets' backend included, before it runs it.
    backend = OpenSandboxBackend(
        "elsewhere", image="python:3.13-slim", cpu="2", memory="4Gi", workdir="/srv/work"
    )
    copied = copy.deepcopy(backend)
    assert copied is not backend and type(copied) is OpenSandboxBackend
    settings = ("opensandbox_conn_id", "image", "cpu", "memory", "sandbox_timeout", "workdir")
    assert [getattr(copied, name) for name in settings] == [
        getattr(backend, name) for name in settings
    ]
    assert copied._lock is not backend._lock and copied._sandboxes == {}
