"""The pod template of make bench's KubernetesExecutor row is one Airflow's provider reads, and
the pod it makes of it for a try runs the Task SDK on the bench's Dag, mounted from this host."""

from __future__ import annotations

import json
from pathlib import Path

from airflow.providers.cncf.kubernetes.pod_generator import PodGenerator

from benchmarks import kubernetes_executor
from benchmarks.executor_dags import overhead_default
from dev.stack import task_sdk_image

URL = "http://10.213.0.1:28080/execution/"


def test_the_provider_makes_a_tries_pod_from_the_template(tmp_path: Path) -> None:
    dags = Path(overhead_default.__file__).parent
    template = tmp_path / "pod-template.yaml"
    template.write_text(json.dumps(kubernetes_executor.pod_template(URL, dags)))
    base = PodGenerator.deserialize_model_file(str(template))
    args = ["python", "-m", "airflow.sdk.execution_time.execute_workload", "--json-string", "{}"]
    pod = PodGenerator.construct_pod(
        dag_id=overhead_default.DAG_ID,
        task_id="at_once",
        pod_id="bench-try",
        try_number=1,
        kube_image=task_sdk_image.TAG,
        date=None,
        args=args,
        pod_override_object=None,
        base_worker_pod=base,
        namespace=kubernetes_executor.NAMESPACE,
        scheduler_job_id="1",
    )
    (container,) = pod.spec.containers
    assert container.name == "base"
    assert container.image == task_sdk_image.TAG
    assert container.args == args
    environment = {variable.name: variable.value for variable in container.env}
    assert environment["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == URL
    assert environment["AIRFLOW__CORE__DAGS_FOLDER"] == kubernetes_executor.POD_DAGS
    # The try's Dag file is where the pod's Dags folder is mounted from.
    (mount,) = container.volume_mounts
    assert mount.mount_path == kubernetes_executor.POD_DAGS
    (volume,) = pod.spec.volumes
    assert volume.host_path.path == str(dags)
    assert (Path(volume.host_path.path) / Path(overhead_default.__file__).name).is_file()
    assert container.resources.requests == kubernetes_executor.REQUESTS
