"""@task.opensandbox against the real server: the image's Python runs the function."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.providers.common.compat.sdk import AirflowException
from airflow.sdk import dag, task

from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.integration.test_operator import CONN_ID, destroyed

OPEN = SandboxSpec(block_network=False)


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
