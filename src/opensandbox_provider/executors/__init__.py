"""
The OpenSandboxExecutor, an Airflow 3 executor: each task try in a sandbox of its own.

It is built on Airflow 3's workloads and Task SDK, which Airflow 2 does not have, so on
Airflow 2 importing it fails with a sentence saying so rather than with a missing name.
"""

from __future__ import annotations

import airflow

if int(airflow.__version__.split(".")[0]) < 3:
    raise ImportError(
        f"The OpenSandboxExecutor is an Airflow 3 executor, and this is Airflow "
        f"{airflow.__version__}: it runs each try with Airflow 3's Task SDK, which Airflow 2 "
        "does not have. Upgrade to Airflow 3, or keep another executor and run commands in "
        "sandboxes with OpenSandboxOperator or @task.opensandbox."
    )

from opensandbox_provider.executors.opensandbox import (  # noqa: E402
    OpenSandboxExecutor,
    sandbox_spec,
)

__all__ = ["OpenSandboxExecutor", "sandbox_spec"]
