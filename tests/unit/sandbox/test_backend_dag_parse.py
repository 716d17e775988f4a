"""A Dag file that only constructs the backend, and the warm pool it draws from, leaves the
OpenSandbox SDK unimported, so Dags parse on a dag-processor without the extra and without the
SDK's import cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SDK = "opensandbox"

DAG_FILE = """\
import importlib.util
import json
import sys

from airflow.providers.common.ai.sandbox import SandboxSpec
from opensandbox_provider.pool import WarmPool
from opensandbox_provider.sandbox import OpenSandboxBackend

spec = SandboxSpec(allow_egress_to=["data.example.com"])
pool = WarmPool("python", size=2, store="redis://localhost:6379/0", spec=spec)
backend = OpenSandboxBackend(
    opensandbox_conn_id="opensandbox_default",
    image="python:3.12-slim",
    sandbox_timeout=600,
    workdir="/srv/work",
    warm_pool=pool,
)
print(json.dumps({
    "installed": importlib.util.find_spec("opensandbox") is not None,
    "loaded": sorted(m for m in sys.modules if m == "opensandbox" or m.startswith("opensandbox.")),
}))
"""


def test_a_dag_file_constructing_the_backend_imports_no_sdk_module(tmp_path: Path) -> None:
    dag = tmp_path / "constructs_the_backend.py"
    dag.write_text(DAG_FILE)
    result = subprocess.run(
        [sys.executable, str(dag)],
        env=os.environ
        | {"PYTHONPATH": str(REPO / "src"), "AIRFLOW_HOME": str(tmp_path / "airflow-home")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    # Installed, the SDK could have been imported: its absence is the backend's doing.
    assert seen["installed"], f"the {SDK} SDK is not installed here, so this proves nothing"
    assert seen["loaded"] == []
