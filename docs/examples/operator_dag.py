"""A script, its input from an object store, its output copied to one: docs/operator.rst,
"A script"."""

# [START script]
from airflow.sdk import ObjectStoragePath, dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator


@dag(schedule=None)
def nightly_report():
    OpenSandboxOperator(
        task_id="report",
        image="python:3.12-slim",
        cpu="1",
        memory="1Gi",
        workdir="/srv/job",
        env={"RUN_DATE": "{{ ds }}"},
        files={
            "report.py": "print('report for {{ ds }}')",
            "input.csv": ObjectStoragePath("s3://bucket/input/latest.csv", conn_id="aws"),
        },
        command="python report.py > report.txt",
        outputs={"report.txt": ObjectStoragePath("s3://bucket/reports/report.txt", conn_id="aws")},
        command_timeout=600,
    )


nightly_report()
# [END script]
