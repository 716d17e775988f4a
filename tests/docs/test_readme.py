"""The README renders as valid reStructuredText, and its Dag example parses in Airflow."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import docutils.core
import docutils.utils

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.rst"

# Loads the file the way the dag-processor does, and prints what it found.
_PARSE = """
import sys
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:  # Airflow before 3.2 keeps it with the models
    from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
tasks = {dag_id: [task.task_id for task in dag.tasks] for dag_id, dag in bag.dags.items()}
print(sorted(bag.import_errors.values()), tasks)
"""


def test_the_readme_renders_without_warnings() -> None:
    # The package index refuses a long description that does not render; warnings start that.
    docutils.core.publish_doctree(
        README.read_text(), settings_overrides={"halt_level": docutils.utils.Reporter.WARNING_LEVEL}
    )


def test_the_readme_dag_parses_in_airflow(tmp_path: Path) -> None:
    (block,) = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", README.read_text())
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "readme_example.py").write_text("\n".join(line[4:] for line in block.splitlines()))
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW", "PYTEST_"))
    } | {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    result = subprocess.run(
        [sys.executable, "-c", _PARSE, str(dags)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # No import errors, and the one Dag with its one agent task; Airflow may log around it.
    assert "[] {'analyse': ['explore']}" in result.stdout.splitlines(), result.stdout
