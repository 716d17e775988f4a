"""
The task instance a sandbox belongs to, as OpenSandbox metadata.

A retry, a cleanup Dag or an admin finds a task's sandboxes by these keys, so each value
must pass OpenSandbox's label rules: at most 63 characters of ``[A-Za-z0-9-_.]``,
alphanumeric at both ends. A value that already passes is stored as it is, so a filter on
it is the plain id; one that does not (a run id with ``:`` or ``+``, a long dag id) keeps a
readable prefix of its allowed characters and ends with a hash of the whole value, so two
different ids never share a label.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

KEYS = {
    "dag_id": "airflow-dag-id",
    "task_id": "airflow-task-id",
    "run_id": "airflow-run-id",
    "map_index": "airflow-map-index",
    "try_number": "airflow-try-number",
}
"""Each identity field and the metadata key that holds it."""

_MAX = 63
_VALID = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DISALLOWED = re.compile(r"[^-A-Za-z0-9_.]+")
# Twelve hex digits of SHA-256: collisions between the ids of one server are not a concern.
_HASH_LENGTH = 12


def label_value(value: object) -> str:
    """Return ``value`` as a label value: itself when it is one, else a prefix and a hash."""
    text = str(value)
    if _VALID.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH_LENGTH]
    prefix = _DISALLOWED.sub("-", text)[: _MAX - _HASH_LENGTH - 1].strip("-_.")
    return f"{prefix}-{digest}" if prefix else f"h{digest}"


def identity_metadata(fields: Mapping[str, object]) -> dict[str, str]:
    """Return the metadata for the identity fields given (any of :data:`KEYS`)."""
    unknown = set(fields) - set(KEYS)
    if unknown:
        raise ValueError(f"These are not task-instance identity fields: {sorted(unknown)}.")
    # An unmapped task's map_index is -1; like KubernetesPodOperator's labels, it is left out
    # rather than stored as a label that cannot start with "-".
    skipped = {"map_index"} if fields.get("map_index") == -1 else set()
    present = {n: v for n, v in fields.items() if v is not None and n not in skipped}
    return {KEYS[name]: label_value(value) for name, value in present.items()}


def current_identity() -> dict[str, str]:
    """Return the running task instance's identity metadata, or nothing outside a task."""
    ti = _current_task_instance()
    if ti is None:
        return {}
    return identity_metadata({name: getattr(ti, name, None) for name in KEYS})


def _current_task_instance() -> Any:
    # common.compat's, which raises RuntimeError outside a task on every Airflow this provider
    # supports; Airflow 2's own raises AirflowException, whose subclass is the task timeout.
    from airflow.providers.common.compat.sdk import get_current_context

    try:
        context = get_current_context()
    except RuntimeError:  # Outside a task there is no context, and no identity to stamp.
        return None
    return context.get("ti") or context.get("task_instance")
