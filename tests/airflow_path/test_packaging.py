"""The package as users get it: sdist and wheel built, the wheel installed into fresh venvs.

One venv has the ``opensandbox`` extra and one does not; each is built once per session
with uv, constrained to the project's pins so the installs come from uv's cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from dev.airflow_stack.home import REPO

DIST_NAME = "airflow-provider-opensandbox"
INSTALL_COMMAND = 'pip install "airflow-provider-opensandbox[opensandbox]"'


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path


@dataclass(frozen=True)
class Venv:
    root: Path
    home: Path

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run one of this venv's commands with a throwaway AIRFLOW_HOME and no inherited setup."""
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AIRFLOW", "PYTEST_", "VIRTUAL_ENV"))
        } | {"AIRFLOW_HOME": str(self.home), **(env or {})}
        result = subprocess.run(
            [str(self.root / "bin" / args[0]), *args[1:]],
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
        return result


def _uv() -> str:
    found = shutil.which("uv")
    if found is None:
        pytest.fail("uv is not on PATH; `make setup` installs it.")
    return found


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    out = tmp_path_factory.mktemp("dist")
    # build makes the sdist, then the wheel from the sdist, so a file the sdist forgets fails here.
    subprocess.run(
        [sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dists(sdist, wheel)


def _venv(root: Path, requirement: str) -> Venv:
    uv = _uv()
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(root)], check=True)
    subprocess.run(
        [
            uv, "pip", "install", "-q", "--python", str(root / "bin" / "python"), requirement,
            "--constraints", str(REPO / "requirements" / "pinned.txt"),
        ],
        check=True,
        timeout=600,
    )  # fmt: skip
    home = root / "airflow-home"
    home.mkdir()
    return Venv(root, home)


@pytest.fixture(scope="session")
def with_extra(dists: Dists, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return _venv(tmp_path_factory.mktemp("venv-extra"), f"{dists.wheel}[opensandbox]")


@pytest.fixture(scope="session")
def without_extra(dists: Dists, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return _venv(tmp_path_factory.mktemp("venv-bare"), str(dists.wheel))


def test_sdist_carries_the_sources_the_wheel_is_built_from(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for expected in (
        "pyproject.toml",
        "README.rst",
        "src/opensandbox_provider/get_provider_info.py",
        "src/opensandbox_provider/hooks/opensandbox.py",
        "src/opensandbox_provider/sandbox/backend.py",
    ):
        assert expected in names


def test_wheel_declares_the_airflow_provider_entry_point(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as wheel:
        (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = wheel.read(entry_points).decode()
    assert "[apache_airflow_provider]" in text
    assert "provider_info = opensandbox_provider.get_provider_info:get_provider_info" in text


def test_wheel_holds_neither_the_tests_nor_the_dev_tools(dists: Dists) -> None:
    # The local stack and the local Airflow (dev/) are development tools, and tests/ is ours.
    with zipfile.ZipFile(dists.wheel) as wheel:
        names = wheel.namelist()
    assert [name for name in names if name.startswith(("tests/", "dev/"))] == []
    assert any(name.startswith("opensandbox_provider/") for name in names)


def test_airflow_lists_the_installed_provider(with_extra: Venv) -> None:
    listed = json.loads(with_extra.run("airflow", "providers", "list", "-o", "json").stdout)
    assert any(provider["package_name"] == DIST_NAME for provider in listed)


def test_airflow_registers_the_opensandbox_connection_type(with_extra: Venv) -> None:
    hooks = json.loads(with_extra.run("airflow", "providers", "hooks", "-o", "json").stdout)
    assert {
        "connection_type": "opensandbox",
        "class": "opensandbox_provider.hooks.opensandbox.OpenSandboxHook",
        "conn_id_attribute_name": "opensandbox_conn_id",
        "package_name": DIST_NAME,
        "hook_name": "OpenSandbox",
    } in hooks


def test_backend_imports_with_the_extra(with_extra: Venv) -> None:
    result = with_extra.run(
        "python",
        "-c",
        "import opensandbox\n"
        "from opensandbox_provider.sandbox import OpenSandboxBackend\n"
        "print(OpenSandboxBackend().name)",
    )
    assert result.stdout.strip() == "opensandbox"


def test_without_the_extra_the_package_imports_and_first_use_names_the_install_command(
    without_extra: Venv,
) -> None:
    # The connection is complete, so the only thing missing on first use is the SDK.
    connection = json.dumps({"conn_type": "opensandbox", "host": "127.0.0.1", "port": 9})
    result = without_extra.run(
        "python",
        "-c",
        "import importlib.util\n"
        "assert importlib.util.find_spec('opensandbox') is None, 'the SDK is installed'\n"
        "from airflow.providers.common.ai.sandbox import SandboxSpec\n"
        "from opensandbox_provider.sandbox import OpenSandboxBackend\n"
        "backend = OpenSandboxBackend()\n"
        "try:\n"
        "    backend.create(spec=SandboxSpec(block_network=False))\n"
        "except Exception as error:\n"
        "    print(type(error).__name__, error)\n",
        env={"AIRFLOW_CONN_OPENSANDBOX_DEFAULT": connection},
    )
    assert result.stdout.startswith("SandboxTerminalError ")
    assert INSTALL_COMMAND in result.stdout


def test_without_the_extra_the_test_button_names_the_install_command(without_extra: Venv) -> None:
    connection = json.dumps({"conn_type": "opensandbox", "host": "127.0.0.1", "port": 9})
    result = without_extra.run(
        "python",
        "-c",
        "from opensandbox_provider.hooks.opensandbox import OpenSandboxHook\n"
        "print(OpenSandboxHook().test_connection())",
        env={"AIRFLOW_CONN_OPENSANDBOX_DEFAULT": connection},
    )
    assert result.stdout.startswith("(False, ")
    assert INSTALL_COMMAND in result.stdout


def test_without_the_extra_airflow_still_lists_the_provider(without_extra: Venv) -> None:
    listed = json.loads(without_extra.run("airflow", "providers", "list", "-o", "json").stdout)
    assert any(provider["package_name"] == DIST_NAME for provider in listed)


def test_the_wheel_ships_the_cleanup_dag_and_it_builds_without_the_sdk(without_extra: Venv) -> None:
    # A dag-processor without the extra parses the cleanup Dag a user put in the Dags folder.
    result = without_extra.run(
        "python",
        "-c",
        "import sys\n"
        "from opensandbox_provider.maintenance import cleanup_dag\n"
        "dag = cleanup_dag()\n"
        "print(dag.dag_id, [task.task_id for task in dag.tasks], 'opensandbox' in sys.modules)",
    )
    assert result.stdout.split() == ["opensandbox_cleanup", "['kill_leaked_sandboxes']", "False"]
