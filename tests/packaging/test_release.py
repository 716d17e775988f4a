"""What a release uploads: reproducible archives that pass twine, metadata an index shows, a wheel
of the package alone, and a backend that imports quickly and leaves the SDK unloaded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest

from dev.airflow_stack.executor_site import EXECUTOR
from dev.airflow_stack.running import CONN_ID
from dev.stack.state import ServerInfo
from tests.packaging import importtime
from tests.packaging.conftest import REPO, Dists, Venv
from tests.unit.sandbox.test_backend_dag_parse import DAG_FILE

pytestmark = pytest.mark.slow

PACKAGE = "opensandbox_provider"
# The budget for importing the backend in a process that has imported Airflow, as every Dag
# file has: the dag-processor pays it once per parsing process.
IMPORT_BUDGET_SECONDS = 2.0
BACKEND_MODULE = "opensandbox_provider.sandbox.backend"
SYSTEM_TESTS = REPO / "system_tests"
# In the installed venv, what Airflow makes of the provider and of the system-test Dags: the
# provider info through its entry point, the plugin, and each Dag as the dag-processor parses it.
_AS_AIRFLOW_SEES_IT = """
import json, sys
from airflow.plugins_manager import get_plugin_info
from airflow.providers_manager import ProvidersManager
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:  # Airflow before 3.2 keeps it with the models
    from airflow.models.dagbag import DagBag
from opensandbox_provider.get_provider_info import get_provider_info
manager = ProvidersManager()
provider = manager.providers["airflow-provider-opensandbox"]
# Airflow adds keys of its own (documentation-url); every one of ours must be as we wrote it.
info = all(provider.data.get(key) == value for key, value in get_provider_info().items())
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({
    "version": provider.version,
    "info": info,
    "hook": manager.hooks["opensandbox"].hook_class_name,
    "plugins": [plugin["name"] for plugin in get_plugin_info()],
    "errors": sorted(bag.import_errors.values()),
    "dags": sorted(bag.dags),
}))
"""


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def wheel_metadata(dists: Dists) -> Message:
    with zipfile.ZipFile(dists.wheel) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        return HeaderParser().parsestr(wheel.read(name).decode())


def sdist_root_file(dists: Dists, name: str) -> bytes:
    """A file at the top of the sdist, beside ``pyproject.toml``."""
    with tarfile.open(dists.sdist) as sdist:
        (member,) = [m for m in sdist.getmembers() if m.name.split("/")[1:] == [name]]
        extracted = sdist.extractfile(member)
        assert extracted is not None
        return extracted.read()


def sdist_metadata(dists: Dists) -> Message:
    return HeaderParser().parsestr(sdist_root_file(dists, "PKG-INFO").decode())


def test_two_builds_of_the_same_commit_are_identical_byte_for_byte(
    builds: tuple[Dists, Dists],
) -> None:
    first, second = builds
    assert first.sdist.name == second.sdist.name
    assert first.sdist.read_bytes() == second.sdist.read_bytes()
    assert first.wheel.name == second.wheel.name
    assert first.wheel.read_bytes() == second.wheel.read_bytes()


def test_twine_passes_both_archives_with_warnings_as_errors(dists: Dists) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dists.sdist), str(dists.wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "No module named twine" in result.stderr:
        pytest.fail("twine is not installed; `make setup` installs it from the pins.")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_both_archives_carry_the_version_classifiers_and_project_urls(dists: Dists) -> None:
    declared = project()
    for metadata in (wheel_metadata(dists), sdist_metadata(dists)):
        assert metadata["Version"] == declared["version"]
        assert metadata.get_all("Classifier") == declared["classifiers"]
        urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or ())
        assert urls == declared.get("urls", {})
        # A link an index shows is an absolute address; until the repository has a public
        # home there is none that is true (docs/releasing.rst).
        assert all(url.startswith("https://") for url in urls.values()), urls
        assert metadata["License-Expression"] == "Apache-2.0"


def test_both_archives_carry_the_license_file(dists: Dists) -> None:
    license_text = (REPO / "LICENSE").read_bytes()
    assert wheel_metadata(dists).get_all("License-File") == ["LICENSE"]
    assert sdist_metadata(dists).get_all("License-File") == ["LICENSE"]
    with zipfile.ZipFile(dists.wheel) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert wheel.read(name) == license_text
    assert sdist_root_file(dists, "LICENSE") == license_text


def test_the_wheel_holds_the_package_and_its_metadata_and_nothing_else(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as wheel:
        names = wheel.namelist()
    dist_info = f"airflow_provider_opensandbox-{project()['version']}.dist-info"
    assert {name.split("/", 1)[0] for name in names} == {PACKAGE, dist_info}
    # File for file the package's sources: no tests, dev/ stack, docs build or benchmarks
    # hide inside it either.
    sources = {
        path.relative_to(REPO / "src").as_posix() for path in (REPO / "src" / PACKAGE).rglob("*.py")
    }
    assert {name for name in names if name.startswith(f"{PACKAGE}/")} == sources
    for unwanted in ("tests/", "dev/", "benchmarks/", "docs/", "_build/", "system_tests/"):
        assert not [name for name in names if unwanted in name], unwanted


def test_the_backend_imports_within_its_budget_and_without_the_sdk(with_extra: Venv) -> None:
    program = f"import airflow\nimport {BACKEND_MODULE}"
    # pip compiles bytecode at install time and uv does not: one run writes it, as pip would
    # have, so that the measured run times imports rather than compilation.
    with_extra.run("-c", program, env={"PYTHONDONTWRITEBYTECODE": ""})
    result = with_extra.run("-X", "importtime", "-c", program)
    names = {entry.name for entry in importtime.imports(result.stderr)}
    assert BACKEND_MODULE in names
    assert "airflow.providers.common.ai.sandbox.base" in names
    assert not [n for n in names if n == "opensandbox" or n.startswith("opensandbox.")]
    backend = importtime.seconds_after(result.stderr, "airflow")
    everything = importtime.top_level_seconds(result.stderr)
    assert backend < IMPORT_BUDGET_SECONDS, (
        f"importing the backend after Airflow took {backend:.2f} s "
        f"({everything:.2f} s with Airflow and the interpreter's start-up)"
    )


def test_a_dag_file_constructing_the_installed_backend_imports_no_sdk_module(
    with_extra: Venv, tmp_path: Path
) -> None:
    dag = tmp_path / "constructs_the_backend.py"
    dag.write_text(DAG_FILE)
    seen = json.loads(with_extra.run(str(dag)).stdout.splitlines()[-1])
    assert seen["installed"], "the extra did not install the SDK, so this proves nothing"
    assert seen["loaded"] == []


def test_the_installed_wheel_registers_the_provider_and_parses_every_system_test_dag(
    with_extra: Venv,
) -> None:
    dags = with_extra.home / "dags"
    shutil.copytree(SYSTEM_TESTS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    # The executor's Dag parses only where its executor is configured, the installed one.
    executors = f"LocalExecutor,{EXECUTOR}"
    env = {"AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__EXECUTOR": executors}
    result = with_extra.run("-c", _AS_AIRFLOW_SEES_IT, str(dags), env=env)
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["version"] == project()["version"]
    assert seen["info"], "Airflow read other provider info than get_provider_info returns"
    assert seen["hook"] == "opensandbox_provider.hooks.opensandbox.OpenSandboxHook"
    assert "opensandbox" in seen["plugins"]
    assert seen["errors"] == []
    assert seen["dags"] == [
        "example_opensandbox_executor",
        "example_opensandbox_maintenance",
        "example_opensandbox_operator",
        "example_sandbox_toolset_opensandbox",
        "example_sandbox_toolset_opensandbox_attach",
        "example_sandbox_toolset_opensandbox_attach_prepared",
    ]


# A Dag as a user writes it after installing the wheel: one command in a sandbox, its output
# checked by the next task through the XCom the operator pushes.
_ONE_COMMAND_DAG = """
from datetime import datetime

from airflow.sdk import dag, task

from airflow.providers.common.ai.sandbox import SandboxSpec
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def installed_wheel_runs_a_command():
    said = OpenSandboxOperator(
        task_id="say",
        command="echo from-the-installed-wheel",
        opensandbox_conn_id="{conn_id}",
        # The stack's plain server has no egress sidecar to enforce a deny-all policy.
        spec=SandboxSpec(block_network=False),
    )

    @task
    def check(result):
        assert "from-the-installed-wheel" in result["stdout"], result

    check(said.output)


installed_wheel_runs_a_command()
"""


@pytest.mark.stack
def test_a_dag_runs_a_command_in_a_sandbox_on_the_installed_wheel(
    with_extra: Venv, plain_server: ServerInfo
) -> None:
    # The install a user makes from `make dist`, with nothing of the source tree: its Airflow,
    # its provider, a sandbox on the stack's server, and a task that reads the result.
    dags = with_extra.home / "run-dags"
    dags.mkdir(exist_ok=True)
    (dags / "installed_wheel.py").write_text(_ONE_COMMAND_DAG.replace("{conn_id}", CONN_ID))
    environment = {
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **plain_server.airflow_connection_env(CONN_ID, use_server_proxy=True),
    }
    with_extra.run("-m", "airflow", "db", "migrate", env=environment)
    result = with_extra.run(
        "-m", "airflow", "dags", "test", "installed_wheel_runs_a_command", env=environment
    )
    output = result.stdout + result.stderr
    assert "state=success" in output, output[-4000:]
    assert "Destroyed sandbox" in output, output[-4000:]
