"""``requirements`` of ``@task.opensandbox``: checked when the Dag is parsed, the set-up
commands that make their environment, and nothing made for them when the task cannot run."""

from __future__ import annotations

import shlex
from datetime import datetime, timedelta

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.providers.common.compat.sdk import AirflowException, dag, task

from opensandbox_provider.decorators import opensandbox as decorator
from opensandbox_provider.decorators._requirements import (
    VENV,
    VENV_PYTHON,
    checked_requirements,
    set_up_commands,
)
from opensandbox_provider.sandbox._snapshots import snapshot_name


def test_the_set_up_makes_a_venv_then_installs_every_requirement_in_one_pip_call() -> None:
    make, install = set_up_commands(["pandas==2.2.3", "numpy<3"], ["--index-url", "http://x/"])
    assert make.endswith(f'"$python" -m venv {VENV}')
    assert shlex.split(install) == [
        VENV_PYTHON,
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--index-url",
        "http://x/",
        "pandas==2.2.3",
        "numpy<3",
    ]


def test_a_requirement_with_shell_characters_stays_one_argument() -> None:
    _, install = set_up_commands(["numpy<3; rm -rf /"], [])
    assert shlex.split(install)[-1] == "numpy<3; rm -rf /"


def test_a_changed_requirement_or_pip_argument_names_another_snapshot() -> None:
    def name(requirements: list[str], pip_args: list[str]) -> str:
        commands = set_up_commands(requirements, pip_args)
        return snapshot_name(
            deployment="production",
            base="image:python:3.12-slim",
            commands=commands,
            env={},
            workdir=None,
        )

    assert name(["a==1"], []) == name(["a==1"], [])
    assert len({name(["a==1"], []), name(["a==2"], []), name(["a==1"], ["--pre"])}) == 3


@pytest.mark.parametrize(
    ("requirements", "pip_args", "setup_spec", "message"),
    [
        ("pandas", None, None, "lists of strings"),
        (["pandas"], "--pre", None, "lists of strings"),
        (["pandas", ""], None, None, "non-empty string"),
        (None, ["--pre"], None, "give requirements too"),
        (None, None, SandboxSpec(block_network=False), "give requirements too"),
        (["pandas"], None, SandboxSpec(owner="someone"), "drop its owner"),
    ],
)
def test_requirements_that_cannot_be_installed_as_given_fail_when_parsed(
    requirements, pip_args, setup_spec, message
) -> None:
    with pytest.raises(ValueError, match=message):
        checked_requirements(requirements, pip_args, setup_spec)


def test_a_file_that_cannot_go_in_fails_before_the_set_up_sandbox_is_made(monkeypatch) -> None:
    def prepare_snapshot(*args: object, **kwargs: object) -> str:
        raise AssertionError("the set-up sandbox was made")

    monkeypatch.setattr(decorator, "prepare_snapshot", prepare_snapshot)

    @task.opensandbox(requirements=["pandas"], files={"big.bin": b"x" * 11}, max_file_bytes=10)
    def uses_pandas() -> None:
        return None

    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        uses_pandas()

    operator = holder().task_dict["uses_pandas"]
    with pytest.raises(AirflowException) as raised:
        operator.execute({})
    assert str(raised.value) == (
        "files['big.bin'] is larger than max_file_bytes (10 bytes), read from its bytes. Raise "
        "max_file_bytes, or fetch the file from inside the sandbox."
    )


def test_credentials_in_pip_args_and_requirement_urls_are_masked_before_the_set_up(
    monkeypatch,
) -> None:
    index_password, wheel_token = "index-password-9f8e", "wheel-token-7d6c"
    masked_before_set_up: list[str] = []

    def prepare_snapshot(*args: object, **kwargs: object) -> str:
        assert masked_before_set_up, "the set-up ran before the credentials were masked"
        raise AirflowException("stop after the set-up")

    monkeypatch.setattr(decorator, "mask_secret", masked_before_set_up.append)
    monkeypatch.setattr(decorator, "prepare_snapshot", prepare_snapshot)

    @task.opensandbox(
        requirements=["pandas", f"tool @ https://files.example/tool.whl?token={wheel_token}"],
        pip_args=["--index-url", f"https://deploy:{index_password}@pypi.example/simple"],
    )
    def uses_pandas() -> None:
        return None

    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        uses_pandas()

    with pytest.raises(AirflowException, match="stop after the set-up"):
        holder().task_dict["uses_pandas"].execute({})
    assert masked_before_set_up == [index_password, wheel_token]


def decorated(**arguments: object):
    """The operator ``@task.opensandbox(**arguments)`` makes, as a Dag file defines it."""

    @task.opensandbox(**arguments)
    def uses_pandas() -> None:
        return None

    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        uses_pandas()

    return holder().task_dict["uses_pandas"]


@pytest.mark.parametrize("max_age", [timedelta(hours=-1), -1, 0, "7d"])
def test_a_snapshot_max_age_that_is_not_a_positive_time_fails_when_parsed(max_age) -> None:
    with pytest.raises(ValueError, match="snapshot_max_age is .*give a positive timedelta"):
        decorated(requirements=["pandas"], snapshot_max_age=max_age)


def test_a_snapshot_max_age_without_requirements_fails_when_parsed() -> None:
    with pytest.raises(ValueError, match="snapshot_max_age describe how requirements"):
        decorated(snapshot_max_age=timedelta(days=1))


def test_the_snapshot_max_age_reaches_the_preparation_as_a_timedelta(monkeypatch) -> None:
    asked: dict[str, object] = {}

    def prepare_snapshot(*args: object, **kwargs: object) -> str:
        asked.update(kwargs)
        raise AirflowException("stop after the set-up")

    monkeypatch.setattr(decorator, "prepare_snapshot", prepare_snapshot)
    operator = decorated(requirements=["pandas"], snapshot_max_age=86400)

    with pytest.raises(AirflowException, match="stop after the set-up"):
        operator.execute({})
    assert asked["max_age"] == timedelta(days=1)
