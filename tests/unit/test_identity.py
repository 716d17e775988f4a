from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from opensandbox_provider._identity import (
    EXACT_PREFIX,
    KEYS,
    TaskInstanceIdentity,
    current_identity,
    identity_metadata,
    label_value,
)

_LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def test_a_valid_value_is_stored_as_it_is():
    assert label_value("my_dag") == "my_dag"
    assert label_value(3) == "3"
    assert label_value(-1).startswith("1-")


@pytest.mark.parametrize(
    "value",
    ["manual__2026-01-01T00:00:00+00:00", "d" * 200, "/", "a" * 63 + "b", "éé", "-x-"],
)
def test_an_invalid_value_becomes_a_label_with_a_readable_prefix(value):
    encoded = label_value(value)
    assert len(encoded) <= 63
    assert _LABEL.fullmatch(encoded), encoded


def test_a_run_id_keeps_its_readable_prefix():
    assert label_value("manual__2026-01-01T00:00:00+00:00").startswith(
        "manual__2026-01-01T00-00-00-00-00"
    )


def test_different_long_ids_get_different_labels():
    assert label_value("d" * 100 + "1") != label_value("d" * 100 + "2")
    assert label_value("a:b") != label_value("a+b")


def test_identity_metadata_uses_the_keys_and_drops_missing_fields():
    assert identity_metadata({"dag_id": "d", "map_index": 3, "try_number": None}) == {
        KEYS["dag_id"]: "d",
        KEYS["map_index"]: "3",
    }


def test_an_unmapped_task_carries_no_map_index():
    assert identity_metadata({"dag_id": "d", "map_index": -1}) == {KEYS["dag_id"]: "d"}
    with pytest.raises(ValueError, match="not task-instance identity"):
        identity_metadata({"owner": "x"})


def test_outside_a_task_there_is_no_identity():
    assert current_identity() == {}


RUN_ID = "manual__2026-01-01T00:00:00+00:00"


def test_an_identity_reads_back_exactly_from_its_metadata():
    identity = TaskInstanceIdentity("d" * 80, "group.task", RUN_ID, map_index=3, try_number=2)
    metadata = identity.metadata()
    assert all(len(key) <= 63 and _LABEL.fullmatch(value) for key, value in metadata.items())
    assert TaskInstanceIdentity.read(metadata) == identity


def test_a_valid_id_is_stored_once_and_a_hashed_one_also_exactly():
    metadata = TaskInstanceIdentity("my_dag", "t", RUN_ID, try_number=1).metadata()
    exact = {key for key in metadata if key.startswith(EXACT_PREFIX)}
    assert exact and all(key.startswith(f"{EXACT_PREFIX}run_id") for key in exact)
    assert metadata[KEYS["dag_id"]] == "my_dag"


def test_a_hashed_label_without_its_exact_copy_names_no_task_instance():
    metadata = TaskInstanceIdentity("my_dag", "t", RUN_ID, try_number=1).metadata()
    labels_only = {k: v for k, v in metadata.items() if not k.startswith(EXACT_PREFIX)}
    assert TaskInstanceIdentity.read(labels_only) is None
    assert TaskInstanceIdentity.read({"created-by": "airflow"}) is None


@pytest.mark.airflow_at_least(
    "3.0", reason="it runs a task through airflow.sdk, which Airflow 2 lacks"
)
def test_inside_a_task_the_identity_is_the_running_task_instances():
    from airflow.sdk.execution_time.context import set_current_context

    ti = SimpleNamespace(dag_id="d", task_id="t", run_id=RUN_ID, map_index=-1, try_number=4)
    with set_current_context({"ti": ti}):
        metadata = current_identity()
    assert TaskInstanceIdentity.read(metadata) == TaskInstanceIdentity("d", "t", RUN_ID, -1, 4)
    assert current_identity() == {}


def test_a_failure_other_than_being_outside_a_task_is_not_hidden(monkeypatch):
    from airflow.providers.common.compat import sdk as compat_sdk

    def broken():
        raise KeyError("ti")

    monkeypatch.setattr(compat_sdk, "get_current_context", broken)
    with pytest.raises(KeyError):
        current_identity()
