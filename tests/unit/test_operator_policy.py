"""The operator copies no outputs from a sandbox whose policy was not proven, and says so."""

from __future__ import annotations

import json

import pytest
from airflow.providers.common.compat.sdk import AirflowException

from opensandbox_provider.egress._policy import PolicyUnproven
from opensandbox_provider.operators import opensandbox as operator_module
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

UNPROVEN = (
    "Sandbox sbx could not be shown to enforce the network policy it was created with, so it "
    "was destroyed after its command: its policy could not be read back."
)


class Backend:
    """What the operator asks of its backend; the policy check after the command fails."""

    def __init__(self) -> None:
        self.destroyed: list[str] = []

    def create(self, *, spec: object) -> str:
        return "sbx"

    def run_command(self, sandbox: str, command: str, **options: object) -> object:
        raise PolicyUnproven(UNPROVEN)

    def recheck_policy(self, sandbox: str, spec: object, *, after: str) -> None:
        raise PolicyUnproven(UNPROVEN)

    def destroy(self, sandbox: str) -> None:
        self.destroyed.append(sandbox)

    def hold(self, sandbox: str) -> None:
        """Back from the trigger the worker renews the sandbox; nothing to renew here."""


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Backend:
    # The operator reads its connection before it creates (for on_kill); nothing is sent to it.
    connection = {"conn_type": "opensandbox", "host": "127.0.0.1", "port": 9, "password": "k"}
    monkeypatch.setenv("AIRFLOW_CONN_OPENSANDBOX_DEFAULT", json.dumps(connection))
    stand_in = Backend()
    monkeypatch.setattr(OpenSandboxOperator, "new_backend", lambda self: stand_in)

    def copy_outputs(*args: object, **kwargs: object) -> dict:
        raise AssertionError("outputs were copied from a sandbox whose policy was not proven")

    monkeypatch.setattr(operator_module, "copy_outputs", copy_outputs)
    return stand_in


def with_outputs(**kwargs: object) -> OpenSandboxOperator:
    return OpenSandboxOperator(
        task_id="t", command="make report", outputs={"/out/report.csv": "file:///tmp/r"}, **kwargs
    )


ENDED = {
    "status": "ended",
    "sandbox": "sbx",
    "exit_code": 0,
    "stdout": "",
    "stderr": "",
    "timed_out": False,
}


def test_back_from_the_trigger_an_unproven_policy_fails_the_task_naming_the_outputs(
    backend,
) -> None:
    with pytest.raises(AirflowException) as raised:
        with_outputs(deferrable=True).execute_complete({}, ENDED)
    message = str(raised.value)
    assert message.startswith(UNPROVEN)
    assert "So its outputs were not copied: '/out/report.csv'." in message
    assert isinstance(raised.value.__cause__, PolicyUnproven)
    assert backend.destroyed == ["sbx"]


def test_in_the_foreground_an_unproven_policy_fails_the_task_naming_the_outputs(backend) -> None:
    with pytest.raises(AirflowException, match="outputs were not copied: '/out/report.csv'"):
        with_outputs().execute({})
    assert backend.destroyed == ["sbx"]


def test_without_outputs_the_policy_error_is_raised_as_it_is(backend) -> None:
    with pytest.raises(PolicyUnproven, match="could not be shown"):
        OpenSandboxOperator(task_id="t", command="true").execute_complete({}, ENDED)
