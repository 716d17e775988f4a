"""An output copied to an asset's URI, whose event runs the Dag scheduled on it:
docs/operator.rst, "Outputs as assets"."""

# [START assets]
from airflow.sdk import Asset, dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

report = Asset(uri="s3://reports/daily/report.csv", name="daily_report")


@dag(schedule=None)
def produce():
    OpenSandboxOperator(
        task_id="write_report",
        command="python make_report.py > report.csv",
        outputs={"report.csv": report},  # copied to the asset's URI, then its event
    )


@dag(schedule=[report])
def consume():
    OpenSandboxOperator(task_id="read_report", command="echo the daily report is in")


produce()
consume()
# [END assets]
