"""
The task instance a sandbox belongs to, as OpenSandbox metadata (docs/operator.rst, "Retries and
finding a task's sandbox"). A value that keeps to OpenSandbox's label rules is stored as it is,
so a filter on it is the plain id; one that breaks them keeps a readable prefix and ends with a
hash of the whole value, so two different ids never share a label, and is stored once more,
losslessly, under ``airflow-ti/``, so that a cleanup can ask Airflow about the task instance by
its real ids.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opensandbox_provider import _tags

KEYS = {
    "dag_id": "airflow-dag-id",
    "task_id": "airflow-task-id",
    "run_id": "airflow-run-id",
    "map_index": "airflow-map-index",
    "try_number": "airflow-try-number",
}
"""Each identity field and the metadata key that holds it."""

EXACT_PREFIX = "airflow-ti/"
"""The prefix of the lossless copies of ids their label could only hash."""

_MAX = 63
_VALID = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DISALLOWED = re.compile(r"[^-A-Za-z0-9_.]+")
# Twelve hex digits of SHA-256: collisions between the ids of one server are not a concern.
_HASH_LENGTH = 12
_IDS = ("dag_id", "task_id", "run_id")
# What a label that hashes its value ends with. A real id may end so too; without its exact
# copy it then reads as unknown, which only makes a cleanup leave its sandbox alone.
_HASHED = re.compile(rf"(^h|-)[0-9a-f]{{{_HASH_LENGTH}}}$")
_UNMAPPED = -1


def label_value(value: object) -> str:
    """Return ``value`` as a label value: itself when it is one, else a prefix and a hash."""
    text = str(value)
    if _VALID.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH_LENGTH]
    prefix = _DISALLOWED.sub("-", text)[: _MAX - _HASH_LENGTH - 1].strip("-_.")
    return f"{prefix}-{digest}" if prefix else f"h{digest}"


def identity_metadata(fields: Mapping[str, object]) -> dict[str, str]:
    """Return the label metadata for the identity fields given (any of :data:`KEYS`)."""
    unknown = set(fields) - set(KEYS)
    if unknown:
        raise ValueError(f"These are not task-instance identity fields: {sorted(unknown)}.")
    # An unmapped task's map_index is -1; like KubernetesPodOperator's labels, it is left out
    # rather than stored as a label that cannot start with "-".
    skipped = {"map_index"} if fields.get("map_index") == _UNMAPPED else set()
    present = {n: v for n, v in fields.items() if v is not None and n not in skipped}
    return {KEYS[name]: label_value(value) for name, value in present.items()}


@dataclass(frozen=True)
class TaskInstanceIdentity:
    """The task instance, and the try of it, that created a sandbox."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = _UNMAPPED
    try_number: int | None = None

    @classmethod
    def of(cls, ti: Any) -> TaskInstanceIdentity:
        """The identity of a running task instance (the ``ti`` of a task's context)."""
        return cls(
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=_UNMAPPED if ti.map_index is None else ti.map_index,
            try_number=ti.try_number,
        )

    def metadata(self) -> dict[str, str]:
        """The labels to filter on, and the exact ids a label could only hash."""
        labels = identity_metadata({name: getattr(self, name) for name in KEYS})
        hashed = {n: getattr(self, n) for n in _IDS if labels[KEYS[n]] != getattr(self, n)}
        return {**labels, **_tags.encode(hashed, prefix=EXACT_PREFIX)}

    def state(self, get_task_states: Any) -> str | None:
        """This task instance's state, asked of the Task SDK's ``get_task_states``."""
        answer = get_task_states(
            dag_id=self.dag_id,
            task_ids=[self.task_id],
            run_ids=[self.run_id],
            map_index=self.map_index,
        )
        # How the Task SDK names a task instance in its answer: a mapped one with its index.
        key = self.task_id if self.map_index < 0 else f"{self.task_id}_{self.map_index}"
        state = (answer.get(self.run_id) or {}).get(key)
        # A TaskInstanceState is a str whose hash is not its value's.
        return None if state is None else str(getattr(state, "value", state))

    @classmethod
    def read(cls, metadata: Mapping[str, str] | None) -> TaskInstanceIdentity | None:
        """
        The identity stored in ``metadata``, or ``None`` when it holds none, or one whose ids
        cannot be recovered exactly (a hashed label without its copy): a cleanup must not
        judge a sandbox by a task instance it cannot name.
        """
        metadata = metadata or {}
        try:
            exact = _tags.decode(metadata, prefix=EXACT_PREFIX)
        except _tags.DamagedTagError:
            return None
        ids: dict[str, str] = {}
        for name in _IDS:
            label = metadata.get(KEYS[name])
            value = exact.get(name)
            if value is None and label is not None and not _HASHED.search(label):
                value = label
            if label is None or value is None or label_value(value) != label:
                return None
            ids[name] = value
        try:
            map_index = int(metadata.get(KEYS["map_index"], _UNMAPPED))
            try_label = metadata.get(KEYS["try_number"])
            try_number = None if try_label is None else int(try_label)
        except ValueError:
            return None
        return cls(**ids, map_index=map_index, try_number=try_number)


def current_identity() -> dict[str, str]:
    """Return the running task instance's identity metadata, or nothing outside a task."""
    ti = current_task_instance()
    return {} if ti is None else TaskInstanceIdentity.of(ti).metadata()


def current_task_instance() -> Any:
    """The running task instance (the ``ti`` of its context), or ``None`` outside a task."""
    # common.compat's, which raises RuntimeError outside a task on every Airflow this provider
    # supports; Airflow 2's own raises AirflowException, whose subclass is the task timeout.
    from airflow.providers.common.compat.sdk import get_current_context

    try:
        context = get_current_context()
    except RuntimeError:  # Outside a task there is no context, and no identity to stamp.
        return None
    return context.get("ti") or context.get("task_instance")
