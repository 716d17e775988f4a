"""Which tests a run against OpenSandbox's Kubernetes runtime holds (``RUNTIME=kubernetes``).

Those of the backend, the operator, the decorator, egress, the system-test Dags and the
OpenSandboxExecutor against a server, whatever its runtime (the executor's local Airflow then
listens on the pod bridge's gateway, where a try's pod reaches it), and the faults made inside
a sandbox. Left out: the unit and tooling tests (no server at all, so nothing the runtime
changes); the stand-ins' conformance and the stack's own tests; the UI's browser test and the
celery topology, which run against the Docker stack; the faults made with servers of the tests'
own, which are Docker-mode servers; the network faults between a worker in a namespace of its
own and the sandbox, whose namespace reaches only the Docker stack's servers. The sixteen
concurrent agent runs of test_load.py run there too: the connection's requests
(dev/kube/opensandbox.py) let the two-core node hold sixteen sandboxes.
"""

from __future__ import annotations

import pytest

# Why a test of a prepared environment (a snapshot) is skipped there: OpenSandbox's controller
# commits a pod to its snapshot registry, and the local cluster has one only when it was started
# with an image-committer (dev/kube/snapshots.py).
NO_SNAPSHOT_REGISTRY = (
    "a snapshot needs the controller's snapshot registry, and the server answers "
    "`RegistryNotConfigured: snapshot-registry not configured in controller manager` "
    "without one"
)

# Paths under tests/, a folder (ending in "/") or a file.
ON_KUBERNETES = (
    "integration/",
    "sidebyside/",
    "network/",
    "reliability/test_sandbox_faults.py",
    "reliability/test_hostile_input.py",
    "reliability/test_load.py",
    "airflow_path/test_system_test_dag.py",
    "airflow_path/test_operator_dag.py",
    "airflow_path/test_executor.py",
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
