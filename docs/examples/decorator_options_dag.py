"""``@task.opensandbox``'s interpreter and requirements: the fragments docs/decorator.rst shows,
each between its markers, in a Dag that parses."""

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task


@dag(schedule=None)
def decorator_options():
    # [START python_command]
    @task.opensandbox(
        image="ghcr.io/example/analytics:2026.1", python_command="/opt/conda/bin/python"
    )
    def fit(rows: list) -> dict:
        from sklearn.linear_model import LinearRegression

        model = LinearRegression().fit([row[:-1] for row in rows], [row[-1] for row in rows])
        return {"coefficients": model.coef_.tolist()}

    # [END python_command]

    # [START requirements]
    @task.opensandbox(
        requirements=["pandas==2.2.3"],
        pip_args=["--index-url", "https://pypi.internal/simple"],
        # The set-up's sandbox reaches the index and nothing else; the function's own sandbox
        # keeps its spec, deny-all by default.
        setup_spec=SandboxSpec(allow_egress_to=["pypi.internal"]),
    )
    def describe(values: list) -> dict:
        import pandas as pd

        return pd.Series(values).describe().to_dict()

    # [END requirements]

    fit([[1, 2], [2, 4], [3, 6]])
    describe([1, 2, 3, 5, 8])


decorator_options()
