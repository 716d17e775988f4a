"""The docs' Python examples are files the tests parse, import and call (docs/examples/), and a
Python block written in a page instead fails the docs build (docs/_ext/python_examples.py)."""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.docs.doc_examples import EXAMPLES, load
from tests.docs.test_docs_build import _build, _project_with

# Each Dag file's Dags, by id, with their tasks: what the pages show is what runs.
DAGS = {
    "agent_dag.py": {"analyse": ["explore"]},
    "asset_dags.py": {"produce": ["write_report"], "consume": ["read_report"]},
    "attach_dag.py": {"findings": ["analyse", "collect", "provision"]},
    "decorator_annotations_dag.py": {"invoice": ["total"]},
    "decorator_dag.py": {"counts": ["letter_counts", "total"]},
    "decorator_options_dag.py": {"decorator_options": ["describe", "fit"]},
    "decorator_snapshot_dag.py": {"analysis": ["describe", "prepare"]},
    "durable_agent_dag.py": {"durable_analysis": ["analyse"]},
    "executor_dag.py": {"on_the_executor": ["heavy", "untrusted"]},
    "operator_dag.py": {"nightly_report": ["report"]},
    "operator_options_dag.py": {
        "operator_options": [
            "count",
            "daily",
            "load",
            "nightly",
            "private",
            "report",
            "rows",
            "train",
            "train_on_a_gpu",
            "upload",
        ]
    },
    "prepared_environment_dag.py": {"prepared": ["analyse", "prepare"]},
    "server_pool_dag.py": {"server_pooled": ["test"]},
    "snapshot_max_age_dag.py": {"snapshot_max_age": ["describe", "prepare"]},
    "warm_pool_dag.py": {"pooled": ["check", "test"]},
}
# The other files: a module a Dag file imports, the functions this file and
# tests/integration/test_docs_examples.py call, and the script a Dag's task reads as its command.
# The options a deployment running the OpenSandboxExecutor sets (docs/executor.rst).
EXECUTOR_OPTIONS = {
    "AIRFLOW__OPENSANDBOX_EXECUTOR__EXECUTION_API_SERVER_URL": "http://172.17.0.1:8080/execution/",
    "AIRFLOW__OPENSANDBOX_EXECUTOR__IMAGE": "registry.internal/airflow-worker:3.3.2",
}
# The examples of the executor, which loads from Airflow 3.3 on (docs/executor.rst); an earlier
# line parses the folder without them.
EXECUTOR_EXAMPLES = {"executor_dag.py", "executor_pools.py"}
EXECUTOR_LINE = (3, 3)
NOT_DAGS = {
    "my_pools.py",
    "executor_pools.py",
    "configuration.py",
    "sandbox_calls.py",
    "nightly.sh",
}

# Loads the folder the way the dag-processor does, which puts its bundle's folder on sys.path
# (so that warm_pool_dag.py imports my_pools.py beside it), and renders the command of the task
# that runs a script file of the folder.
_PARSE = """
import json, sys
sys.path.append(sys.argv[1])
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:  # Airflow before 3.2 keeps it with the models
    from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
nightly = bag.dags["operator_options"].get_task("nightly")
nightly.render_template_fields({"ds": "2026-01-01"})
print(json.dumps({
    "errors": bag.import_errors,
    "dags": {
        dag_id: [dag.fileloc.rsplit("/", 1)[-1], sorted(dag.task_ids)]
        for dag_id, dag in bag.dags.items()
    },
    "nightly": nightly.command,
}))
"""


def _airflow_line() -> tuple[int, int]:
    import airflow

    major, minor = airflow.__version__.split(".")[:2]
    return int(major), int(minor)


def test_every_example_file_is_a_dag_file_or_one_the_tests_use() -> None:
    assert sorted(path.name for path in EXAMPLES.iterdir() if path.is_file()) == sorted(
        set(DAGS) | NOT_DAGS
    )


@pytest.mark.airflow_at_least("3.0", reason="the examples import dag and task from airflow.sdk")
def test_every_example_dag_parses_in_airflow_with_the_tasks_the_docs_show(tmp_path: Path) -> None:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW", "PYTEST_"))
    } | {
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    folder, dags = EXAMPLES, DAGS
    if _airflow_line() >= EXECUTOR_LINE:
        environment |= {
            # executor_dag.py's task names the executor, which a deployment using it configures.
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor,"
            "opensandbox_provider.executors.OpenSandboxExecutor",
            # executor_pools.py, which the folder's parse imports too, reads its options.
            **EXECUTOR_OPTIONS,
        }
    else:
        folder = tmp_path / "examples"
        shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns(*EXECUTOR_EXAMPLES))
        dags = {file: each for file, each in DAGS.items() if file not in EXECUTOR_EXAMPLES}
    result = subprocess.run(
        [sys.executable, "-c", _PARSE, str(folder)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # Airflow may log around it; the last line is ours.
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    assert parsed["errors"] == {}
    expected = {
        dag_id: [file, sorted(tasks)]
        for file, each in dags.items()
        for dag_id, tasks in each.items()
    }
    assert parsed["dags"] == expected
    # The script beside the Dag file, read and rendered as the task's command.
    assert parsed["nightly"] == "python report.py --day 2026-01-01 > report.txt"


def test_the_backend_example_gives_every_argument_its_default() -> None:
    # The page shows the arguments with their defaults; the example is its source.
    example = load("configuration")
    call = next(
        node
        for node in ast.walk(ast.parse(inspect.getsource(example.backend_with_its_defaults)))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "OpenSandboxBackend"
    )
    shown = {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
    defaults = inspect.signature(OpenSandboxBackend).parameters
    assert shown == {name: defaults[name].default for name in shown}
    assert isinstance(example.backend_with_its_defaults(), OpenSandboxBackend)


def test_the_configuration_examples_build_what_the_pages_say(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    example = load("configuration")
    assert example.toolset_with_open_egress().id == "sandbox-opensandbox"
    example.toolset_that_pauses("a-handle")
    mounts = example.backend_with_volumes().volumes
    assert [(mount.mount_path, mount.read_only) for mount in mounts] == [
        ("/data", True),
        ("/models", True),
        ("/scratch", False),
    ]
    monkeypatch.setenv("INGEST_API_TOKEN", "token-of-the-example")
    pool = example.pool_with_a_secret()
    # The secret reaches the pool's sandboxes, and its name alone the metadata anyone reads.
    assert pool.private_env == {"API_TOKEN": "token-of-the-example"}
    assert "token-of-the-example" not in json.dumps(pool.idle_metadata())


# One page of each kind the check must tell apart, built with the docs' own configuration.
PROBE = """

Written here
------------

.. code-block:: python

    print("never run")

A literal block of Python::

    import os

A literal block of log lines::

    Created OpenSandbox sandbox 4f6e... from image python:3.12-slim, in 0.59s.

.. code-block:: bash

    make docs

Included from a tested file
---------------------------

.. literalinclude:: examples/tested.py
   :language: python

Included from elsewhere
-----------------------

.. literalinclude:: elsewhere.py
   :language: python
"""


def test_only_python_written_in_a_page_or_included_from_an_untested_file_fails_the_build(
    tmp_path: Path,
) -> None:
    source = _project_with(tmp_path, PROBE)
    (source / "examples").mkdir()
    (source / "examples" / "tested.py").write_text("print('parsed by a test')\n")
    (source / "elsewhere.py").write_text("print('parsed by nobody')\n")
    result = _build(source, tmp_path / "html")
    assert result.returncode != 0
    warned = sorted(
        (int(line.split(":")[1]), line.split("WARNING: ")[1].split(".")[0])
        for line in result.stderr.splitlines()
        if "WARNING: " in line
    )
    page = (source / "index.rst").read_text().splitlines()
    assert [(page[number - 1].strip(), why) for number, why in warned] == [
        (".. code-block:: python", "A Python example written in the page is never run"),
        ("import os", "A Python example written in the page is never run"),
        (".. literalinclude:: elsewhere.py", "A Python example is included from elsewhere"),
    ], result.stderr


@pytest.mark.airflow_at_least("3.3", reason="the executor's first line")
def test_the_executors_warm_pool_example_is_defined_with_the_executors_own_spec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in EXECUTOR_OPTIONS.items():
        monkeypatch.setenv(name, value)
    example = load("executor_pools")
    assert example.AIRFLOW_TRIES.name == "airflow-tries"
    assert example.AIRFLOW_TRIES.spec.block_network
