"""KubernetesExecutor for ``make bench``'s case (h) (benchmarks/executor_overhead.py): a local
Airflow whose tries each run in a pod of their own on the local cluster (docs/kubernetes.rst,
"Local cluster"), so that a pod's start is measured on the same machine as a sandbox's.

Each pod runs the Task SDK image the stack builds, which the cluster's ``up`` of the servers
imports (``make kube-server-up``), as the official Airflow image would be; the bench's Dag
folder is mounted from this host, and the pod reaches the api-server on the pod bridge's
gateway, where it listens. Airflow's own provider (``apache-airflow-providers-cncf-kubernetes``)
makes the pods, from a pod template file as a deployment writes one.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.executor_dags import overhead_default
from dev.airflow_stack.home import AirflowSite
from dev.kube import api, network, runtime
from dev.kube.opensandbox import kubectl
from dev.kube.paths import ADMIN_KUBECONFIG
from dev.stack import task_sdk_image

# Away from OpenSandbox's namespace, so that counting what is left counts only these pods.
NAMESPACE = "airflow-bench"
POD_DAGS = "/opt/airflow/dags"
# How long the executor may take to delete the last tries' pods after the run ended.
PODS_GONE_SECONDS = 60.0
# What a pod asks for, as the stack's sandboxes do on the cluster (dev/kube/opensandbox.py):
# the two-core node then holds the executor's slots at once.
REQUESTS = {"cpu": "100m", "memory": "128Mi"}


def unavailable() -> str | None:
    """Why this machine cannot run the row now, or None."""
    if not ADMIN_KUBECONFIG.exists() or not api.ready():
        return "not measured: the local cluster is not up (`make kube-server-up`)"
    if not runtime.has_image(task_sdk_image.TAG):
        return f"not measured: the cluster has no {task_sdk_image.TAG} (`make kube-server-up`)"
    return None


def pod_template(execution_api_server_url: str, dags: Path) -> dict[str, object]:
    """The pod each try runs in; KubernetesExecutor adds the try's command and labels."""
    environment = {
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": execution_api_server_url,
        "AIRFLOW__CORE__DAGS_FOLDER": POD_DAGS,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "KubernetesExecutor",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "placeholder"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "base",
                    "image": task_sdk_image.TAG,
                    "imagePullPolicy": "IfNotPresent",
                    "env": [{"name": name, "value": value} for name, value in environment.items()],
                    "resources": {"requests": REQUESTS},
                    "volumeMounts": [{"name": "dags", "mountPath": POD_DAGS, "readOnly": True}],
                }
            ],
            "volumes": [{"name": "dags", "hostPath": {"path": str(dags), "type": "Directory"}}],
        },
    }


def with_kubernetes_executor(site: AirflowSite) -> AirflowSite:
    """``site`` on KubernetesExecutor alone, its api-server on the pod bridge's gateway; the
    namespace its pods run in is made if missing."""
    if NAMESPACE not in kubectl("get", "namespaces", "-o", "name"):
        kubectl("create", "namespace", NAMESPACE)
    gateway = network.gateway_ip()
    url = f"http://{gateway}:{site.port}/execution/"
    template = site.home / "pod-template.yaml"
    # JSON is YAML: the provider reads the file with a YAML loader.
    dags = Path(overhead_default.__file__).parent
    template.write_text(json.dumps(pod_template(url, dags), indent=2))
    repository, tag = task_sdk_image.TAG.rsplit(":", 1)
    settings = {
        "AIRFLOW__CORE__EXECUTOR": "KubernetesExecutor",
        "AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE": str(template),
        "AIRFLOW__KUBERNETES_EXECUTOR__NAMESPACE": NAMESPACE,
        "AIRFLOW__KUBERNETES_EXECUTOR__IN_CLUSTER": "False",
        "AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE": str(ADMIN_KUBECONFIG),
        "AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_REPOSITORY": repository,
        "AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_TAG": tag,
        "AIRFLOW__KUBERNETES_EXECUTOR__DELETE_WORKER_PODS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": url,
    }
    return replace(site, host=gateway, settings={**site.settings, **settings})


def pods_left() -> list[str]:
    """The pods still in the bench's namespace."""
    names = kubectl("get", "pods", "-n", NAMESPACE, "-o", "name", check=False)
    return [line for line in names.splitlines() if line.startswith("pod/")]


def wait_for_no_pods() -> list[str]:
    """Until the bench's namespace holds no pod; those still there after PODS_GONE_SECONDS."""
    deadline = time.monotonic() + PODS_GONE_SECONDS
    while (left := pods_left()) and time.monotonic() < deadline:
        time.sleep(1.0)
    return left


def delete_pods() -> None:
    """Whatever pod a failed run left in the bench's namespace."""
    kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--wait=false", check=False)
