"""Prepared environments that are made again once they are a day old:
docs/prepared-environments.rst, "Snapshots that follow their inputs"."""

# [START max_age]
from datetime import timedelta

from airflow.sdk import dag, task

from opensandbox_provider.sandbox import OpenSandboxBackend, prepare_snapshot

SET_UP = ["python -m venv /opt/env", "/opt/env/bin/pip install pandas"]


@dag(schedule=None)
def snapshot_max_age():
    @task
    def prepare() -> str:
        return prepare_snapshot(OpenSandboxBackend(), SET_UP, max_age=timedelta(days=1))

    @task.opensandbox(requirements=["pandas"], snapshot_max_age=timedelta(days=1))
    def describe(values: list) -> dict:
        import pandas as pd

        return pd.Series(values).describe().to_dict()

    prepare()
    describe([1, 2, 3, 5, 8])


snapshot_max_age()
# [END max_age]
