from __future__ import annotations

import re

import pytest

from opensandbox_provider.sandbox._identity import (
    KEYS,
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
