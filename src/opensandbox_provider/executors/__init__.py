"""
The OpenSandboxExecutor, an Airflow 3 executor: each task try in a sandbox of its own.

It is built on Airflow 3's workloads and Task SDK, which Airflow 2 does not have, so on
Airflow 2 importing it fails with a sentence saying so rather than with a missing name.
"""

from __future__ import annotations

try:
    from airflow.executors import workloads as _workloads  # noqa: F401
except ImportError:
    raise ImportError(
        "The OpenSandboxExecutor is an Airflow 3 executor: it runs each try with Airflow 3's "
        "Task SDK, which this Airflow does not have. Upgrade to Airflow 3, or run tasks with "
        "another executor and their commands with OpenSandboxOperator or @task.opensandbox."
    ) from None

from opensandbox_provider.executors.opensandbox import OpenSandboxExecutor

__all__ = ["OpenSandboxExecutor"]
