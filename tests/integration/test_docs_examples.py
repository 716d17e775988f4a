"""The docs' examples whose result a page states, run on the local stack: a decorated function's
return value, a command's JSON result as the task's XCom, and the calls the pages make on a
sandbox that already exists."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox import SandboxSpec

from dev.stack.state import ServerInfo
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.docs.doc_examples import load
from tests.integration.conftest import CONN_ID
from tests.integration.test_task_identity import FakeTi, inside


@pytest.fixture
def connected(plain_server: ServerInfo, monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples' ``opensandbox_default`` connection, to the server without a sidecar."""
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def executed(dns_nft_server: ServerInfo, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Executes a task of an example Dag, as the operator tests do, on the server whose sidecar
    enforces the deny-all policy the examples' default spec asks for; its sandbox never
    outlives the test."""
    for name, value in dns_nft_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    ran: list[Any] = []

    def execute(task: Any) -> Any:
        ran.append(task)
        return task.execute({})

    yield execute
    for task in ran:
        if task._sandbox_id is not None:
            OpenSandboxBackend(CONN_ID).destroy(task._sandbox_id)


def test_the_decorator_example_returns_each_words_length(executed) -> None:
    counts = load("decorator_dag").counts()
    assert executed(counts.get_task("letter_counts")) == {"alpha": 5, "beta": 4, "gamma": 5}


def test_the_xcom_path_example_returns_the_document_its_command_wrote(executed) -> None:
    options = load("operator_options_dag").operator_options()
    # As the page says under the example: counts.output is {"rows": 1234}.
    assert executed(options.get_task("count")) == {"rows": 1234}


def test_the_hook_and_reach_examples_list_look_into_renew_and_kill_a_runs_sandbox(
    connected: None, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = load("sandbox_calls")
    run_id = f"manual__{uuid.uuid4().hex}"
    # A sandbox of the Dag run the hook example lists, as a task of it would have made.
    task = FakeTi(dag_id="reports", task_id="provision", run_id=run_id, map_index=-1, try_number=1)
    backend = OpenSandboxBackend(CONN_ID)
    with inside(task):
        sandbox = backend.create(spec=SandboxSpec(block_network=False))
    try:
        backend.hand_over(sandbox)  # its lease is the examples' to move from here on
        calls.look_into_a_kept_sandbox(sandbox)
        looked = capsys.readouterr().out
        calls.list_renew_and_kill(run_id, sandbox)
        listed = capsys.readouterr().out
    finally:
        backend.destroy(sandbox)
    assert looked.startswith("total "), looked
    assert listed.startswith(f"{sandbox} provision "), listed
    assert not any(
        found.id == sandbox and found.state != "Terminated"
        for found in OpenSandboxHook(CONN_ID).list_sandboxes(dag_id="reports", run_id=run_id)
    )
