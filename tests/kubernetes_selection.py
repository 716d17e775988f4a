"""Which tests a run against OpenSandbox's Kubernetes runtime holds (``RUNTIME=kubernetes``).

Those of the backend, the operator, the decorator and the system-test Dags against a server,
whatever its runtime. Left out: the unit tests (no server at all, so nothing the runtime
changes), and the folders about the Docker stack and the harness around it, which a
Kubernetes run would only repeat: the stand-ins' conformance, the stack's own tests, the
topology and the local Airflow that run on the Docker stack, and the faults made with servers
of the tests' own, which are Docker-mode servers.
"""

from __future__ import annotations

import pytest

# Paths under tests/, a folder (ending in "/") or a file.
ON_KUBERNETES = (
    "integration/",
    "sidebyside/",
    "network/",
    "airflow_path/test_system_test_dag.py",
    "airflow_path/test_operator_dag.py",
)


def on_kubernetes(nodeid: str) -> bool:
    path = nodeid.split("::", 1)[0].removeprefix("tests/")
    return any(
        path == kept or (kept.endswith("/") and path.startswith(kept)) for kept in ON_KUBERNETES
    )


def keep_what_runs_on_kubernetes(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects, as ``-k`` would, every test outside ``ON_KUBERNETES``; not a skip, since the
    runtime is not what keeps them out."""
    left_out = [item for item in items if not on_kubernetes(item.nodeid)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if on_kubernetes(item.nodeid)]
