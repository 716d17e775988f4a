"""A decorated function run with the interpreter of a prepared environment: docs/decorator.rst,
"In a prepared environment"."""

# [START prepared]
from airflow.sdk import dag, task

from opensandbox_provider.sandbox import OpenSandboxBackend, prepare_snapshot

SET_UP = ["python -m venv /opt/env", "/opt/env/bin/pip install pandas==2.2.3"]


@dag(schedule=None)
def analysis():
    @task
    def prepare() -> str:
        # Reused, without running anything, while SET_UP and the image stay the same.
        return prepare_snapshot(OpenSandboxBackend(), SET_UP)

    @task.opensandbox(
        snapshot="{{ ti.xcom_pull('prepare') }}",
        python_command="/opt/env/bin/python",
    )
    def describe(values: list) -> dict:
        import pandas as pd

        return pd.Series(values).describe().to_dict()

    prepare() >> describe([1, 2, 3, 5, 8])


analysis()
# [END prepared]
