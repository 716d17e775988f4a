"""@task.opensandbox against the real server: the image's Python runs the function."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.providers.common.compat.sdk import AirflowException
from airflow.sdk import dag, task

from opensandbox_provider.sandbox import OpenSandboxBackend, delete_snapshot, prepare_snapshot
from tests.integration.test_operator import CONN_ID, destroyed

if TYPE_CHECKING:
    import decimal

OPEN = SandboxSpec(block_network=False)
# A virtual environment of its own, as a prepared environment would hold one.
VENV = "/opt/task-env"


@task.opensandbox(spec=OPEN)
def describe(words: list, *, upper: bool = False) -> dict:
    import sys

    shown = [word.upper() if upper else word for word in words]
    return {"words": shown, "python": sys.version_info[0]}


@task.opensandbox(spec=OPEN)
def fails() -> None:
    raise ValueError("no good input")


@task.opensandbox(spec=OPEN)
def returns_a_set() -> object:
    return {1, 2}


@task.opensandbox(spec=OPEN)
def total(prices: list[decimal.Decimal | str]) -> str:
    # The annotation names a module imported only here, as the sandbox needs it.
    import decimal

    return str(sum(decimal.Decimal(price) for price in prices))


@task.opensandbox(spec=OPEN, python_command=f"{VENV}/bin/python", snapshot="{{ prepared }}")
def in_the_environment() -> dict:
    import pathlib
    import sys

    return {"prefix": sys.prefix, "marker": pathlib.Path(sys.prefix, "marker").read_text()}


@task.opensandbox(spec=OPEN, python_command="/opt/no-such-env/bin/python")
def without_the_environment() -> None:
    return None


@pytest.fixture
def built(plain_server, monkeypatch):
    """The decorated tasks of a Dag; their sandboxes never outlive the test."""
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    made: list[Any] = []

    def build(function: Any, *args: Any, **kwargs: Any) -> Any:
        @dag(schedule=None, start_date=datetime(2026, 1, 1))
        def holder() -> None:
            function(*args, **kwargs)

        made.append(holder().task_dict[function.function.__name__])
        return made[-1]

    yield build
    for operator in made:
        if operator._sandbox_id is not None:
            OpenSandboxBackend(CONN_ID).destroy(operator._sandbox_id)


def test_the_functions_return_value_comes_back_as_the_tasks_result(built) -> None:
    operator = built(describe, ["a", "b"], upper=True)
    assert operator.execute({}) == {"words": ["A", "B"], "python": 3}
    assert destroyed(operator._sandbox_id)


def test_an_exception_in_the_function_fails_the_task_with_its_traceback(built) -> None:
    operator = built(fails)
    with pytest.raises(AirflowException, match="exited 1") as failure:
        operator.execute({})
    assert "ValueError: no good input" in str(failure.value)
    assert destroyed(operator._sandbox_id)


def test_a_return_value_that_is_not_json_fails_the_task_saying_so(built) -> None:
    operator = built(returns_a_set)
    with pytest.raises(AirflowException, match="cannot be serialized as JSON"):
        operator.execute({})
    assert destroyed(operator._sandbox_id)


def test_a_function_annotated_with_a_type_it_imports_itself_runs_in_the_sandbox(built) -> None:
    operator = built(total, ["1.10", "2.25"])
    assert operator.execute({}) == "3.35"
    assert destroyed(operator._sandbox_id)


@pytest.mark.needs_snapshots
def test_python_command_runs_the_function_in_a_prepared_environment(
    built, backend_on, plain_server
) -> None:
    token = uuid.uuid4().hex
    preparer = backend_on(plain_server)
    snapshot = prepare_snapshot(
        preparer, [f"python3 -m venv --without-pip {VENV}", f"echo -n {token} > {VENV}/marker"]
    )
    try:
        operator = built(in_the_environment)
        operator.render_template_fields({"prepared": snapshot})
        assert operator.execute({}) == {"prefix": VENV, "marker": token}
        assert destroyed(operator._sandbox_id)
    finally:
        delete_snapshot(preparer, snapshot)


def test_a_python_command_the_sandbox_lacks_fails_the_task_saying_so(built) -> None:
    operator = built(without_the_environment)
    with pytest.raises(AirflowException, match="exited 127") as failure:
        operator.execute({})
    assert "was given python_command='/opt/no-such-env/bin/python'" in str(failure.value)
    assert destroyed(operator._sandbox_id)
