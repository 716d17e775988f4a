"""The task's return value read from a JSON file the command wrote in the sandbox."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.sandbox.base import SandboxError
from airflow.providers.common.compat.sdk import AirflowException

if TYPE_CHECKING:
    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

# A return value is an XCom: it is stored in the metadata database and read whole by each
# task that pulls it and by the UI. 8 MiB holds a result of many thousands of records; data
# larger than that belongs in a file copied out through ``outputs``.
MAX_RESULT_BYTES = 8 * 1024 * 1024
# Airflow's serializer and the UI's JSON view walk a value recursively, and Python's parser
# raises RecursionError near a thousand levels; a record nested past a hundred is no record
# anyone reads, and this bound keeps the failure ours, with a message.
MAX_RESULT_DEPTH = 100
# With multiple_outputs each key is an XCom of its own: a row of the metadata database and,
# on Airflow 3, a request of its own to the API server. A thousand is far more than any
# downstream task pulls by name; a larger mapping belongs in one XCom, or in a file.
MAX_OUTPUT_KEYS = 1000


def read_result(
    backend: OpenSandboxBackend, sandbox: str, path: str, *, multiple_outputs: bool = False
) -> Any:
    """
    The JSON document at ``path`` in the sandbox, or a failure saying why there is none, or
    why it is too deep, or too many XComs for ``multiple_outputs``.
    """
    try:
        content = backend.read_file(sandbox, path, max_bytes=MAX_RESULT_BYTES)
    except SandboxError as e:
        raise AirflowException(
            f"The command succeeded, but the task's result could not be read from {path!r}: {e} "
            "The command must write one JSON document there, of at most "
            f"{MAX_RESULT_BYTES // (1024 * 1024)} MiB, before it exits 0."
        ) from e
    too_deep = AirflowException(
        f"The command succeeded, but the JSON document in {path!r} is nested more than "
        f"{MAX_RESULT_DEPTH} levels deep. Return a flatter document, or write the data to a "
        "file copied out through outputs."
    )
    try:
        result = json.loads(content)
    except RecursionError:
        raise too_deep from None
    except ValueError as e:
        raise AirflowException(
            f"The command succeeded, but {path!r} does not hold one JSON document ({e}). "
            "Have the command write it with json.dump, or jq, and nothing else into that file."
        ) from e
    if _depth_over(result, MAX_RESULT_DEPTH):
        raise too_deep
    if multiple_outputs and isinstance(result, dict) and len(result) > MAX_OUTPUT_KEYS:
        raise AirflowException(
            f"The command succeeded, but the JSON document in {path!r} has {len(result)} keys, "
            f"and with multiple_outputs each is an XCom of its own; at most {MAX_OUTPUT_KEYS} "
            "are pushed. Return them under fewer keys, or drop multiple_outputs to push the "
            "document as one XCom."
        )
    return result


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` deep, found without
    recursion, so that the check itself cannot exhaust the stack."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > limit:
            return True
        stack.extend(
            (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
        )
    return False
