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


def read_result(backend: OpenSandboxBackend, sandbox: str, path: str) -> Any:
    """The JSON document at ``path`` in the sandbox, or a failure saying why there is none."""
    try:
        content = backend.read_file(sandbox, path, max_bytes=MAX_RESULT_BYTES)
    except SandboxError as e:
        raise AirflowException(
            f"The command succeeded, but the task's result could not be read from {path!r}: {e} "
            "The command must write one JSON document there, of at most "
            f"{MAX_RESULT_BYTES // (1024 * 1024)} MiB, before it exits 0."
        ) from e
    try:
        return json.loads(content)
    except ValueError as e:
        raise AirflowException(
            f"The command succeeded, but {path!r} does not hold one JSON document ({e}). "
            "Have the command write it with json.dump, or jq, and nothing else into that file."
        ) from e
