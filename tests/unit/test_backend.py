"""What OpenSandboxBackend decides before it talks to any server."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

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
