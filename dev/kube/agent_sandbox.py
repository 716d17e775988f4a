"""kubernetes-sigs' agent-sandbox on the local cluster: the second workload OpenSandbox's
server runs sandboxes on in Kubernetes mode (``workload_provider = "agent-sandbox"``).

Like OpenSandbox's own controller, agent-sandbox's is built by hand and named by two variables:
``AGENT_SANDBOX_CONTROLLER_BIN`` (the binary of its ``cmd/agent-sandbox-controller``) and
``AGENT_SANDBOX_CRDS_DIR`` (its ``k8s/crds`` folder). Both are optional: without them the
cluster runs the BatchSandbox servers only (docs/kubernetes.rst, "agent-sandbox").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

WORKLOAD = "agent-sandbox"
CONTROLLER = "agent-sandbox-controller"
# Beside OpenSandbox's controller's probe (18181), on loopback only.
CONTROLLER_HEALTH = "127.0.0.1:18182"
# The Sandbox resource the server's agent-sandbox provider creates, one per sandbox.
RESOURCE = "sandboxes.agents.x-k8s.io"


def configured() -> tuple[Path, Path] | None:
    """The controller's binary and CRD folder, or None when neither variable is set."""
    controller = os.environ.get("AGENT_SANDBOX_CONTROLLER_BIN", "").strip()
    crds = os.environ.get("AGENT_SANDBOX_CRDS_DIR", "").strip()
    if not controller and not crds:
        return None
    if not controller or not os.access(controller, os.X_OK):
        raise RuntimeError(
            "Set AGENT_SANDBOX_CONTROLLER_BIN to agent-sandbox's controller binary (built from "
            "cmd/agent-sandbox-controller of its repository), or unset AGENT_SANDBOX_CRDS_DIR "
            "to run without the agent-sandbox server."
        )
    if not crds or not any(Path(crds).glob("*.yaml")):
        raise RuntimeError(
            "Set AGENT_SANDBOX_CRDS_DIR to agent-sandbox's CRD folder (k8s/crds in its "
            "repository, of the same commit as the controller), or unset "
            "AGENT_SANDBOX_CONTROLLER_BIN to run without the agent-sandbox server."
        )
    return Path(controller), Path(crds)


def crds(directory: Path) -> dict[str, Any]:
    """Every CRD of the folder as one List, each converting between its versions without a webhook.

    The stock CRDs convert through the controller's webhook, a Service inside the cluster; the
    controller runs on this host with its webhook off, and then (its own log says so) the CRDs
    must use ``strategy: None``. Every client here speaks the storage version, so nothing is lost.
    """
    items = []
    for path in sorted(directory.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") == "CustomResourceDefinition":
                document["spec"]["conversion"] = {"strategy": "None"}
                items.append(document)
    return {"apiVersion": "v1", "kind": "List", "items": items}


def controller_argv(binary: Path, kubeconfig: Path) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--health-probe-bind-address={CONTROLLER_HEALTH}",
        "--metrics-bind-address=0",
        # No webhook (see crds) and one controller, so no lease to elect it.
        "--enable-webhook=false",
        "--manage-webhook-certs=false",
        "--leader-elect=false",
    ]
