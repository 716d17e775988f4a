"""``OpenSandboxOperator``'s arguments one at a time: the fragments docs/operator.rst and
docs/prepared-environments.rst show, each between its markers, in a Dag that parses. The suite
runs the ``count`` task on the local stack (tests/integration/test_docs_examples.py)."""

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator


@dag(schedule=None)
def operator_options():
    # [START templated]
    OpenSandboxOperator(
        task_id="daily",
        image="{{ var.value.report_image }}",
        memory="{{ params.memory }}",
        workdir="/srv/{{ ds_nodash }}",
        files={"{{ ds }}/query.sql": "select * from events where day = '{{ ds }}'"},
        command="run-report {{ ds }}/query.sql > r.csv",
        outputs={"r.csv": "s3://bucket/reports/{{ ds }}/r.csv"},
        params={"memory": "4Gi"},
    )
    # [END templated]

    # [START script_file]
    OpenSandboxOperator(task_id="nightly", command="nightly.sh", files={"report.py": "..."})
    # [END script_file]

    # [START private_env]
    OpenSandboxOperator(
        task_id="upload",
        command='curl -fsS -H "Authorization: Bearer $API_TOKEN" https://api.example.com/ingest',
        private_env={"API_TOKEN": "{{ conn.ingest_api.password }}"},
        spec=SandboxSpec(allow_egress_to=["api.example.com"]),
    )
    # [END private_env]

    # [START xcom_path]
    counts = OpenSandboxOperator(
        task_id="count",
        workdir="/srv/job",
        command="""python -c 'import json; json.dump({"rows": 1234}, open("result.json", "w"))'""",
        xcom_path="result.json",
    )

    @task
    def rows(result: dict) -> int:
        return result["rows"]

    rows(counts.output)  # counts.output is {"rows": 1234}
    # [END xcom_path]

    # [START deferrable]
    OpenSandboxOperator(
        task_id="train",
        image="python:3.12-slim",
        command="python train.py",
        files={"train.py": "..."},
        command_timeout=6 * 3600,
        deferrable=True,
    )
    # [END deferrable]

    # [START grace]
    OpenSandboxOperator(
        task_id="load",
        command="trap 'psql -c \"ROLLBACK\"; exit 1' TERM; ./load.sh",
        command_timeout=1800,
        termination_grace_period=30,
    )
    # [END grace]

    # [START resources]
    OpenSandboxOperator(
        task_id="train_on_a_gpu",
        image="registry.example.com/ml/trainer:3",
        cpu="4",
        memory="16Gi",
        cpu_request="2",
        memory_request="8Gi",
        resources={"nvidia.com/gpu": "1"},
        command="python train.py",
    )
    # [END resources]

    # [START registry]
    OpenSandboxOperator(
        task_id="private",
        image="registry.example.com:5000/team/tool:2",
        registry_conn_id="team_registry",
        command="tool --version",
    )
    # [END registry]

    # [START snapshot]
    OpenSandboxOperator(
        task_id="report",
        command="/opt/env/bin/python report.py",
        snapshot="{{ ti.xcom_pull('prepare') }}",
    )
    # [END snapshot]


operator_options()
