"""The tag encoding on its own: lossless, label-shaped, and blind to metadata it did not write."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

import pytest
from airflow.providers.common.ai.sandbox.base import (
    EXPIRES_AT_TAG,
    HOLDER_TAG,
    NETWORK_TAG,
    OWNER_TAG,
    WORKDIR_TAG,
    SandboxError,
    SandboxSpec,
    encode_network_policy,
)

from opensandbox_provider import _tags
from opensandbox_provider._deployment import KEY as DEPLOYMENT_KEY
from opensandbox_provider._tags import DamagedTagError

DEPLOYMENT = "production"

# OpenSandbox's metadata rules (Kubernetes label rules), as the server states them in its
# 400 INVALID_METADATA_LABEL messages; the integration tests check them against the server.
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]*[a-z0-9])?")

OWNER = "my_dag/manual__2026-01-01T00:00:00+00:00"
ODD_VALUES = [
    OWNER,
    f"{OWNER}/agent[3]",
    encode_network_policy(
        SandboxSpec(
            allow_egress_to=["allowed.test", "other.test"], allow_egress_to_cidrs=["172.17.0.1/32"]
        )
    ),
    "/work space/ünïcødé 🚀",
    "",
    "-",
    "_",
    ".",
    "a" * 63,
    "a" * 64,
    "-" * 300,
    "_" * 300,
    "x-" * 200,
    "é" * 100,
    "a.b",
    "1700000000",
    "line\nbreak\ttab\x00nul",
]


def is_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and LABEL_NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and LABEL_VALUE.fullmatch(value) is not None


@pytest.mark.parametrize("value", ODD_VALUES, ids=range(len(ODD_VALUES)))
def test_odd_and_long_values_read_back_exactly(value):
    metadata = _tags.encode({OWNER_TAG: value})
    assert _tags.decode(metadata) == {OWNER_TAG: value}


@pytest.mark.parametrize("value", ODD_VALUES, ids=range(len(ODD_VALUES)))
def test_every_key_and_value_obeys_the_label_rules(value):
    for key, stored in _tags.encode({HOLDER_TAG: value}).items():
        assert is_label_key(key), key
        assert is_label_value(stored), stored


def test_random_text_round_trips_and_stays_label_shaped():
    rng = random.Random(20261129)
    alphabet = "aZ09-_./:+[]{}\"' \n\té€🚀"
    for _ in range(500):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))
        metadata = _tags.encode({NETWORK_TAG: value})
        assert all(is_label_value(stored) for stored in metadata.values())
        assert _tags.decode(metadata) == {NETWORK_TAG: value}


def test_an_owner_stays_legible_in_the_metadata():
    metadata = _tags.encode({OWNER_TAG: OWNER})
    assert (
        metadata[f"{_tags.PREFIX}{OWNER_TAG}.0"]
        == "vmy_dag.2Fmanual__2026-01-01T00.3A00.3A00.2B00.3A00"
    )


def test_all_tags_live_under_one_prefix():
    metadata = _tags.encode({OWNER_TAG: OWNER, HOLDER_TAG: f"{OWNER}/agent", WORKDIR_TAG: "/w"})
    assert all(key.startswith(_tags.PREFIX) for key in metadata)


def test_metadata_written_by_others_is_not_read():
    metadata = {
        **_tags.encode({OWNER_TAG: OWNER}),
        "created-by": "airflow",
        "team": "data",
        "example.com/airflow_owner": "someone-else",
    }
    assert _tags.decode(metadata) == {OWNER_TAG: OWNER}


def test_patch_leaves_metadata_written_by_others_alone():
    current = {
        **_tags.encode({OWNER_TAG: OWNER, HOLDER_TAG: "h"}),
        "created-by": "airflow",
        "team": "x",
    }
    changes = _tags.patch(current, {OWNER_TAG: OWNER})
    assert "created-by" not in changes
    assert "team" not in changes


def test_removing_a_tag_deletes_its_header_and_chunks_by_merge_patch_null():
    holder = f"{OWNER}/agent[12]"
    current = _tags.encode({OWNER_TAG: OWNER, HOLDER_TAG: holder})
    holder_keys = [key for key in current if key.startswith(f"{_tags.PREFIX}{HOLDER_TAG}")]
    assert len(holder_keys) == 3
    assert _tags.patch(current, {OWNER_TAG: OWNER}) == dict.fromkeys(holder_keys)


def test_an_unchanged_tag_is_not_rewritten():
    current = _tags.encode({OWNER_TAG: OWNER})
    assert _tags.patch(current, {OWNER_TAG: OWNER}) == {}


def test_a_shorter_value_deletes_the_chunks_it_no_longer_uses():
    current = _tags.encode({WORKDIR_TAG: "/w" * 100})
    changes = _tags.patch(current, {WORKDIR_TAG: "/w"})
    merged = {key: value for key, value in {**current, **changes}.items() if value is not None}
    assert merged == _tags.encode({WORKDIR_TAG: "/w"})


def test_a_chunk_left_over_from_a_longer_value_is_ignored():
    metadata = {**_tags.encode({WORKDIR_TAG: "/w" * 100}), **_tags.encode({WORKDIR_TAG: "/w"})}
    assert _tags.decode(metadata) == {WORKDIR_TAG: "/w"}


def test_a_rewritten_chunk_fails_the_checksum():
    metadata = _tags.encode({OWNER_TAG: OWNER})
    metadata[f"{_tags.PREFIX}{OWNER_TAG}.0"] = (
        "vother_dag.2Fmanual__2026-01-01T00.3A00.3A00.2B00.3A00"
    )
    with pytest.raises(DamagedTagError, match="checksum"):
        _tags.decode(metadata)


def test_a_missing_chunk_is_reported():
    metadata = _tags.encode({HOLDER_TAG: f"{OWNER}/agent[3]"})
    del metadata[f"{_tags.PREFIX}{HOLDER_TAG}.1"]
    with pytest.raises(DamagedTagError, match="missing"):
        _tags.decode(metadata)


@pytest.mark.parametrize("header", ["", "1", "x.0000abcd", "01.0000abcd", "1.ABCDEF01"])
def test_a_header_that_is_not_ours_is_reported(header):
    metadata = {f"{_tags.PREFIX}{OWNER_TAG}": header}
    with pytest.raises(DamagedTagError, match="not a tag header"):
        _tags.decode(metadata)


@pytest.mark.parametrize("chunk", ["my_dag", "v.2", "v.zz", "v/a", "va b"])
def test_a_chunk_that_is_not_ours_is_reported(chunk):
    metadata = {f"{_tags.PREFIX}{OWNER_TAG}": "1.00000000", f"{_tags.PREFIX}{OWNER_TAG}.0": chunk}
    with pytest.raises(DamagedTagError):
        _tags.decode(metadata)


@pytest.mark.parametrize("name", ["", "Owner", "a.b", "_a", "a_", "a/b", "a" * 57])
def test_a_tag_name_that_cannot_be_a_key_is_refused(name):
    with pytest.raises(ValueError, match="cannot be stored as sandbox metadata"):
        _tags.encode({name: "v"})


def test_the_longest_tag_name_still_leaves_room_for_chunk_indexes():
    name = "a" * 56
    metadata = _tags.encode({name: "x" * 62 * 1000})
    assert all(is_label_key(key) for key in metadata)
    assert _tags.decode(metadata) == {name: "x" * 62 * 1000}


def test_read_tags_adds_the_servers_expiry_as_epoch_seconds():
    expires = datetime(2026, 1, 1, 12, 0, 30, 900_000, tzinfo=UTC)
    tags = _tags.read("sb-1", _tags.encode({OWNER_TAG: OWNER}), expires_at=expires)
    assert tags == {OWNER_TAG: OWNER, EXPIRES_AT_TAG: str(int(expires.timestamp()))}
    assert _tags.read("sb-1", None, expires_at=None) == {}


def test_read_tags_of_damaged_metadata_says_how_to_recover():
    metadata = {f"{_tags.PREFIX}{OWNER_TAG}": "not a header"}
    with pytest.raises(SandboxError, match="Sandbox sb-1 carries tags this backend cannot read"):
        _tags.read("sb-1", metadata, expires_at=None)


def test_a_new_sandbox_is_stamped_for_operators_and_carries_tags_only_when_provisioned():
    plain = _tags.creation_metadata(
        SandboxSpec(), workdir="/w", lease=3600.0, identity={}, deployment=DEPLOYMENT
    )
    assert plain.pop("created-by") == "airflow"
    assert plain.pop(DEPLOYMENT_KEY) == DEPLOYMENT
    assert re.fullmatch(r"airflow-sandbox-[0-9a-f]{12}", plain.pop("name"))
    assert plain == {_tags.LEASE_KEY: "3600"}
    assert _tags.creation_metadata(
        None, workdir=None, lease=60.0, identity={}, deployment=DEPLOYMENT
    ).keys() == {
        "created-by",
        DEPLOYMENT_KEY,
        "name",
        _tags.LEASE_KEY,
    }
    spec = SandboxSpec(owner=OWNER)
    provisioned = _tags.creation_metadata(
        spec, workdir="/w", lease=60.0, identity={}, deployment=DEPLOYMENT
    )
    assert _tags.decode(provisioned) == _tags.provisioning_tags(spec, workdir="/w")


def test_a_new_sandbox_carries_the_identity_of_the_task_instance_creating_it():
    identity = {"airflow-dag-id": "d", "airflow-try-number": "2"}
    stamped = _tags.creation_metadata(
        None, workdir=None, lease=60.0, identity=identity, deployment=DEPLOYMENT
    )
    assert stamped.items() >= identity.items()
    assert _tags.decode(stamped) == {}


def test_a_tag_value_utf8_cannot_hold_is_refused_with_where() -> None:
    with pytest.raises(ValueError, match="a lone surrogate at character 2"):
        _tags.encode({"owner": "ab\ud800c"})


def test_damaged_metadata_is_quoted_on_one_bounded_line() -> None:
    header = "1.0000000x\n[2026-12-01] INFO - forged" + "y" * 10_000
    with pytest.raises(SandboxError) as raised:
        _tags.read("sb-1", {_tags.PREFIX + "owner": header}, expires_at=None)
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 1000


def test_the_creators_lease_is_read_back_in_whole_seconds_rounded_up():
    stamped = _tags.creation_metadata(
        None, workdir=None, lease=90.5, identity={}, deployment=DEPLOYMENT
    )
    assert _tags.stamped_lease(stamped, default=600.0) == 91.0


@pytest.mark.parametrize("value", [None, "", "0", "-5", "1e3", "90.5", "٣٠٠"])
def test_a_lease_stamp_that_is_missing_or_not_whole_seconds_gives_the_default(value):
    metadata = {} if value is None else {_tags.LEASE_KEY: value}
    assert _tags.stamped_lease(metadata, default=600.0) == 600.0
    assert _tags.stamped_lease(None, default=600.0) == 600.0
