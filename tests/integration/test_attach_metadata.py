"""The tag encoding against the real server: its label rules, and an exact round trip through them.

Every sandbox here is created and patched with the real ``opensandbox`` SDK, and what is read
back is what the server returns from ``GET /sandboxes/{id}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from airflow.providers.common.ai.sandbox.base import (
    HOLDER_TAG,
    NETWORK_TAG,
    OWNER_TAG,
    WORKDIR_TAG,
    SandboxSpec,
    encode_network_policy,
)
from opensandbox import SandboxSync
from opensandbox.exceptions import SandboxApiException

from dev.stack.state import ServerInfo, StackState
from opensandbox_provider import _tags

OWNER = "my_dag/manual__2026-01-01T00:00:00+00:00"
HOLDER = f"{OWNER}/agent_task[17]"
NETWORK = encode_network_policy(
    SandboxSpec(
        allow_egress_to=["allowed.test", "api.wild.test", "files.example.test"],
        allow_egress_to_cidrs=["172.17.0.1/32", "203.0.113.0/24"],
    )
)
# Longer than any real tag, with every character class the escaping treats differently.
LONG = "".join(f"segment-{n}_/:+[]{{}} ünï 🚀." for n in range(150))
TAGS = {
    OWNER_TAG: OWNER,
    HOLDER_TAG: HOLDER,
    NETWORK_TAG: NETWORK,
    WORKDIR_TAG: "/home/agent/work space",
    "airflow_long": LONG,
    "airflow_empty": "",
}
FOREIGN = {"created-by": "airflow", "team": "data-platform", "example.com/cost-centre": "42"}


@pytest.fixture
def sandbox(stack: StackState, plain_server: ServerInfo) -> Iterator[SandboxSync]:
    sb = SandboxSync.create(
        stack.sandbox_image,
        timeout=timedelta(minutes=5),
        metadata=FOREIGN,
        connection_config=plain_server.connection_config(),
    )
    try:
        yield sb
    finally:
        sb.destroy()


def metadata_of(sb: SandboxSync) -> dict[str, str]:
    return dict(sb.get_info().metadata or {})


def ours(metadata: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in metadata.items() if key.startswith(_tags.PREFIX)}


def foreign(metadata: dict[str, str]) -> dict[str, str]:
    # The image's own labels show up as metadata too, so only the keys this test wrote count.
    return {key: metadata[key] for key in FOREIGN if key in metadata}


@pytest.mark.parametrize(
    ("key", "value"),
    [(OWNER_TAG, OWNER), (NETWORK_TAG, NETWORK), (OWNER_TAG, "a" * 64), ("airflow/owner/x", "v")],
    ids=["owner-with-slash-and-colons", "network-json", "64-characters", "key-with-two-slashes"],
)
def test_the_server_refuses_raw_tags_as_metadata(sandbox, key, value):
    with pytest.raises(SandboxApiException) as refused:
        sandbox.patch_metadata({key: value})

    assert refused.value.status_code == 400
    assert "INVALID_METADATA_LABEL" in refused.value.error.code


def test_every_encoded_key_and_value_is_accepted_by_the_server(sandbox):
    encoded = _tags.encode(TAGS)

    sandbox.patch_metadata(encoded)

    metadata = metadata_of(sandbox)
    assert ours(metadata) == encoded
    assert foreign(metadata) == FOREIGN
    assert max(len(value) for value in encoded.values()) == 63


def test_tags_patched_onto_a_sandbox_read_back_exactly(sandbox):
    sandbox.patch_metadata(_tags.patch(metadata_of(sandbox), TAGS))

    assert _tags.decode(metadata_of(sandbox)) == TAGS


def test_tags_stamped_at_create_read_back_exactly(stack, plain_server):
    # Create-time metadata becomes Docker labels, a different store from patched metadata.
    sb = SandboxSync.create(
        stack.sandbox_image,
        timeout=timedelta(minutes=5),
        metadata={**FOREIGN, **_tags.encode(TAGS)},
        connection_config=plain_server.connection_config(),
    )
    try:
        assert _tags.decode(metadata_of(sb)) == TAGS
    finally:
        sb.destroy()


def test_removing_a_tag_by_merge_patch_null_leaves_other_metadata_alone(sandbox):
    sandbox.patch_metadata(_tags.patch(metadata_of(sandbox), TAGS))
    released = {name: value for name, value in TAGS.items() if name != HOLDER_TAG}

    sandbox.patch_metadata(_tags.patch(metadata_of(sandbox), released))

    metadata = metadata_of(sandbox)
    assert _tags.decode(metadata) == released
    assert foreign(metadata) == FOREIGN
    assert ours(metadata) == _tags.encode(released)


def test_a_removed_create_time_tag_stays_removed_after_later_patches(stack, plain_server):
    sb = SandboxSync.create(
        stack.sandbox_image,
        timeout=timedelta(minutes=5),
        metadata={**FOREIGN, **_tags.encode({OWNER_TAG: OWNER, HOLDER_TAG: HOLDER})},
        connection_config=plain_server.connection_config(),
    )
    try:
        sb.patch_metadata(_tags.patch(metadata_of(sb), {OWNER_TAG: OWNER}))
        sb.patch_metadata(_tags.patch(metadata_of(sb), {OWNER_TAG: OWNER, WORKDIR_TAG: "/w"}))

        assert _tags.decode(metadata_of(sb)) == {OWNER_TAG: OWNER, WORKDIR_TAG: "/w"}
    finally:
        sb.destroy()


def test_a_value_that_shrinks_leaves_no_stale_chunks_on_the_server(sandbox):
    sandbox.patch_metadata(_tags.patch(metadata_of(sandbox), {WORKDIR_TAG: LONG}))

    sandbox.patch_metadata(_tags.patch(metadata_of(sandbox), {WORKDIR_TAG: "/w"}))

    assert ours(metadata_of(sandbox)) == _tags.encode({WORKDIR_TAG: "/w"})
