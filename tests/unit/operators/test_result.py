"""What OpenSandboxOperator returns once its command succeeded, and when it returns nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxFileTooLargeError
from airflow.providers.common.compat.sdk import AirflowException, mask_secret

from opensandbox_provider.operators._command_end import CommandEnd
from opensandbox_provider.operators._result import (
    MAX_OUTPUT_KEYS,
    MAX_RESULT_BYTES,
    MAX_RESULT_DEPTH,
)
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from tests.unit.airflow_versions import forget_masked_values, task_masker

SUCCEEDED = CommandEnd(exit_code=0, stdout="done\n", stderr="", timed_out=False)


class Files:
    """A sandbox's files as the backend reads them, and each read asked for."""

    def __init__(self, **files: bytes) -> None:
        self.files = {f"/{name}": content for name, content in files.items()}
        self.reads: list[tuple[str, int]] = []

    def read_file(self, sandbox: str, path: str, *, max_bytes: int) -> bytes:
        self.reads.append((path, max_bytes))
        if path not in self.files:
            raise SandboxError(f"{path!r} does not exist in the sandbox.")
        if len(self.files[path]) > max_bytes:
            raise SandboxFileTooLargeError(path, len(self.files[path]), max_bytes)
        return self.files[path]


def finish(operator: OpenSandboxOperator, files: Files) -> Any:
    return operator._finish(files, "sandbox-1", SUCCEEDED)  # type: ignore[arg-type]


def test_by_default_the_task_returns_the_exit_code_and_the_tail_of_stdout() -> None:
    operator = OpenSandboxOperator(task_id="t", command="echo done")
    assert finish(operator, Files()) == {"exit_code": 0, "stdout": "done\n"}


def test_the_json_in_xcom_path_is_the_tasks_result() -> None:
    files = Files(**{"out.json": json.dumps({"rows": 3, "tables": ["a", "b"]}).encode()})
    operator = OpenSandboxOperator(task_id="t", command="true", xcom_path="/out.json")

    assert finish(operator, files) == {"rows": 3, "tables": ["a", "b"]}
    assert files.reads == [("/out.json", MAX_RESULT_BYTES)]


def test_a_missing_result_file_fails_the_task_saying_what_to_write() -> None:
    operator = OpenSandboxOperator(task_id="t", command="true", xcom_path="/out.json")
    with pytest.raises(AirflowException) as failure:
        finish(operator, Files())
    message = str(failure.value)
    assert "result could not be read from '/out.json'" in message
    assert "does not exist in the sandbox" in message
    assert "must write one JSON document there, of at most 8 MiB" in message


def test_a_result_file_that_is_not_json_fails_the_task_saying_so() -> None:
    operator = OpenSandboxOperator(task_id="t", command="true", xcom_path="/out.json")
    with pytest.raises(AirflowException, match="'/out.json' does not hold one JSON document"):
        finish(operator, Files(**{"out.json": b'{"rows": 3'}))
    with pytest.raises(AirflowException, match="does not hold one JSON document"):
        finish(operator, Files(**{"out.json": b"\xff\xfe"}))


@pytest.mark.parametrize("depth", [MAX_RESULT_DEPTH + 1, 5000, 1_000_000])
def test_a_result_nested_past_the_bound_fails_the_task_saying_so(depth) -> None:
    # Past about a thousand levels Python's own parser would raise RecursionError.
    operator = OpenSandboxOperator(task_id="t", command="true", xcom_path="/out.json")
    deep = b"[" * depth + b"]" * depth
    with pytest.raises(AirflowException, match="nested more than 100 levels deep"):
        finish(operator, Files(**{"out.json": deep}))


def test_a_result_nested_to_the_bound_is_returned() -> None:
    operator = OpenSandboxOperator(task_id="t", command="true", xcom_path="/out.json")
    deep = b'{"a": ' * (MAX_RESULT_DEPTH - 1) + b"[1]" + b"}" * (MAX_RESULT_DEPTH - 1)
    assert finish(operator, Files(**{"out.json": deep})) == json.loads(deep)


def test_multiple_outputs_past_the_key_bound_fails_the_task_before_any_xcom() -> None:
    many = json.dumps({f"k{i}": i for i in range(MAX_OUTPUT_KEYS + 1)}).encode()
    operator = OpenSandboxOperator(
        task_id="t", command="true", xcom_path="/out.json", multiple_outputs=True
    )
    with pytest.raises(AirflowException, match=r"has 1001 keys.*at most 1000 are pushed"):
        finish(operator, Files(**{"out.json": many}))
    # As one XCom the same document is no trouble.
    single = OpenSandboxOperator(task_id="t", command="true", xcom_path="/out.json")
    assert len(finish(single, Files(**{"out.json": many}))) == MAX_OUTPUT_KEYS + 1


def test_a_result_file_past_the_bound_fails_the_task_unread() -> None:
    operator = OpenSandboxOperator(task_id="t", command="true", xcom_path="/out.json")
    big = b'"' + b"a" * MAX_RESULT_BYTES + b'"'
    with pytest.raises(AirflowException, match="over the 8388608 byte limit"):
        finish(operator, Files(**{"out.json": big}))


def test_without_do_xcom_push_nothing_is_returned_and_no_result_is_read() -> None:
    files = Files()
    quiet = OpenSandboxOperator(
        task_id="t", command="true", xcom_path="/out.json", do_xcom_push=False
    )
    assert finish(quiet, files) is None
    assert files.reads == []
    assert (
        finish(OpenSandboxOperator(task_id="u", command="true", do_xcom_push=False), files) is None
    )


def test_a_masked_secret_the_command_printed_is_masked_in_the_returned_stdout() -> None:
    masker = task_masker()
    patterns, replacer = masker.patterns, masker.replacer
    forget_masked_values(masker)
    try:
        mask_secret("s3cr3t-printed-by-the-command")
        end = CommandEnd(
            exit_code=0,
            stdout="token s3cr3t-printed-by-the-command\n",
            stderr="",
            timed_out=False,
        )
        operator = OpenSandboxOperator(task_id="t", command="true")
        result = operator._finish(Files(), "sandbox-1", end)  # type: ignore[arg-type]
    finally:
        masker.patterns, masker.replacer = patterns, replacer
    assert result == {"exit_code": 0, "stdout": "token ***\n"}
