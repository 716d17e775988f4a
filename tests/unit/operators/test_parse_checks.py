"""What OpenSandboxOperator refuses when the Dag is parsed, before any task runs.

Each refusal is of an argument that is never templated, so the Dag's import is where its
author sees it; the templated ones are checked once rendered (test_opensandbox_templating.py).
"""

from __future__ import annotations

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator


def operator(**arguments: object) -> OpenSandboxOperator:
    return OpenSandboxOperator(task_id="t", command="true", **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-5, 0, float("inf"), float("nan"), "60", True])
def test_a_command_timeout_that_is_no_positive_number_fails_at_parse_time(value: object) -> None:
    with pytest.raises(ValueError, match="command_timeout must be a positive finite number"):
        operator(command_timeout=value)


@pytest.mark.parametrize("value", [0, -1, "1", None])
def test_a_poll_interval_that_is_no_positive_number_fails_at_parse_time(value: object) -> None:
    with pytest.raises(ValueError, match="poll_interval must be a positive finite number"):
        operator(poll_interval=value)


@pytest.mark.parametrize("value", ["99", ["99"], [1, "2"], 1.5, [True]])
def test_a_skip_on_exit_code_that_is_no_exit_code_fails_at_parse_time(value: object) -> None:
    # "99" used to become the set of its characters, {'9'}, which no exit code matches.
    with pytest.raises(ValueError, match="skip_on_exit_code must be an exit code or a list"):
        operator(skip_on_exit_code=value)


def test_an_exit_code_given_as_a_tuple_or_set_is_taken_as_given() -> None:
    assert operator(skip_on_exit_code=(1, 2)).skip_on_exit_code == {1, 2}
    assert operator(skip_on_exit_code={3}).skip_on_exit_code == {3}


def test_a_file_whose_content_cannot_be_copied_in_fails_at_parse_time() -> None:
    with pytest.raises(ValueError, match=r"files\['a'\] is a int; give text, bytes"):
        operator(files={"a": 3})


def test_a_file_whose_path_is_no_text_fails_at_parse_time() -> None:
    with pytest.raises(ValueError, match="files has the path 3; each key must be a path"):
        operator(files={3: "text"})


def test_a_file_from_an_upstream_tasks_output_is_left_to_the_run() -> None:
    from airflow.providers.common.compat.sdk import DAG, task

    with DAG("parse_checks", schedule=None):

        @task
        def upstream() -> str:
            return "text"

        made = OpenSandboxOperator(task_id="t", command="true", files={"a": upstream()})

    assert set(made.files) == {"a"}


def test_a_host_list_given_as_one_string_fails_at_parse_time() -> None:
    with pytest.raises(SandboxTerminalError, match="allow_egress_to is the string 'example.com'"):
        operator(spec=SandboxSpec(allow_egress_to="example.com"))  # type: ignore[arg-type]


def test_a_cidr_with_host_bits_set_fails_at_parse_time() -> None:
    with pytest.raises(SandboxTerminalError, match="has host bits set: write the range as"):
        operator(spec=SandboxSpec(allow_egress_to_cidrs=["203.0.113.7/24"]))


def test_an_allowlist_on_an_open_spec_fails_at_parse_time() -> None:
    with pytest.raises(SandboxTerminalError, match="sets block_network=False"):
        operator(spec=SandboxSpec(block_network=False, allow_egress_to=["data.example.com"]))


def test_a_spec_that_is_no_sandbox_spec_fails_at_parse_time() -> None:
    with pytest.raises(ValueError, match="spec must be a SandboxSpec"):
        operator(spec={"block_network": False})


def test_a_valid_allowlist_parses() -> None:
    spec = SandboxSpec(allow_egress_to=["data.example.com"], allow_egress_to_cidrs=["10.0.0.0/8"])
    assert operator(spec=spec).spec is spec


def test_the_operator_checks_its_backends_arguments_without_making_a_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A backend holds a lock and a lifecycle client: a Dag's parse makes none.
    from opensandbox_provider.sandbox import OpenSandboxBackend

    def made(self) -> None:
        raise AssertionError("the operator made a backend when the Dag was parsed")

    monkeypatch.setattr(OpenSandboxBackend, "_start_afresh", made)
    OpenSandboxOperator(task_id="t", command="true", cpu="2")
    with pytest.raises(ValueError, match="sandbox_timeout"):
        OpenSandboxOperator(task_id="t", command="true", sandbox_timeout=1)
