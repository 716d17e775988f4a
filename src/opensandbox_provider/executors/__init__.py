"""
The OpenSandboxExecutor, an executor for Airflow 3.3 and later: each task try in a sandbox of
its own. Earlier lines lack the executor interface it is built on, so there importing it fails
with a sentence saying so rather than with a missing name.
"""

from __future__ import annotations

import re

import airflow

FIRST_AIRFLOW_LINE = (3, 3)

_line = re.match(r"(\d+)\.(\d+)", airflow.__version__)
if _line is None or tuple(map(int, _line.groups())) < FIRST_AIRFLOW_LINE:
    raise ImportError(
        f"The OpenSandboxExecutor needs Airflow 3.3 or later, and this is Airflow "
        f"{airflow.__version__}: it is built on the executor interface Airflow 3.3 brought "
        "(its workloads, and where the execution API answers), which earlier lines lack. "
        "Upgrade Airflow, or keep another executor and run commands in sandboxes with "
        "OpenSandboxOperator or @task.opensandbox."
    )

from opensandbox_provider.executors.opensandbox import (  # noqa: E402
    OpenSandboxExecutor,
    sandbox_spec,
)

__all__ = ["OpenSandboxExecutor", "sandbox_spec"]
