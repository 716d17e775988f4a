"""
Common-ai's sandbox tags <-> OpenSandbox metadata, losslessly.

A tag does not fit a label value (63 characters of ``[A-Za-z0-9-_.]``), so each is stored as a
header and escaped, numbered chunks under ``airflow-tag/`` (docs/attach.rst, "How the tags are
stored"). No key outside that prefix is ever rewritten or removed; the only others written are
those a new sandbox is created with (its finders' keys, its lease, its deployment and task).
"""

from __future__ import annotations

import math
import re
import string
import uuid
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import (
    EXPIRES_AT_TAG,
    NETWORK_TAG,
    OWNER_TAG,
    WORKDIR_TAG,
    SandboxError,
    encode_network_policy,
)

from opensandbox_provider._deployment import KEY as DEPLOYMENT_KEY

if TYPE_CHECKING:
    from datetime import datetime

    from airflow.providers.common.ai.sandbox.base import SandboxSpec

PREFIX = "airflow-tag/"
"""Every metadata key holding a tag starts with this, and no other key does."""
# Stamped on every sandbox so an operator on a shared server can find Airflow's with a
# metadata filter.
CREATED_BY = {"created-by": "airflow"}

LEASE_KEY = "lease-seconds"
"""The creator's lease, in whole seconds: what any holder renews the sandbox to."""
_LEASE = re.compile(r"[1-9][0-9]{0,9}")

# A value is at most 63 characters (OpenSandbox's label rule); one goes to the lead.
_CHUNK_BODY = 62
_LEAD = "v"
_ESCAPE = "."
# Written as themselves anywhere in a chunk except its last character.
_INNER_ONLY = frozenset("-_")
_ALNUM = frozenset(string.ascii_letters + string.digits)
# A tag name becomes a key name with ``.<index>`` appended, and a key name is at most
# 63 characters; 56 leaves room for a million chunks.
_NAME = re.compile(r"[a-z0-9]([a-z0-9_]{0,54}[a-z0-9])?")
_HEADER = re.compile(r"(0|[1-9][0-9]*)\.([0-9a-f]{8})")
_ESCAPED_BYTE = re.compile(r"\.([0-9A-F]{2})")
# Metadata the server returns is quoted into an error this far, its repr keeping it on one line.
_QUOTED = 100


class DamagedTagError(ValueError):
    """The metadata holding a tag is not what :func:`encode` writes."""


def encode(tags: Mapping[str, str], *, prefix: str = PREFIX) -> dict[str, str]:
    """Return the metadata entries that store ``tags``, each key starting with ``prefix``."""
    metadata: dict[str, str] = {}
    for name, value in tags.items():
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"Tag name {name!r} cannot be stored as sandbox metadata: use 1 to 56 lowercase "
                "letters, digits and underscores, starting and ending with a letter or digit."
            )
        try:
            value.encode()
        except UnicodeEncodeError as e:
            raise ValueError(
                f"Tag {name!r} cannot be stored as sandbox metadata: its value is not text UTF-8 "
                f"can encode (a lone surrogate at character {e.start})."
            ) from e
        chunks = _chunks(value)
        metadata[prefix + name] = f"{len(chunks)}.{_checksum(value)}"
        for index, chunk in enumerate(chunks):
            metadata[f"{prefix}{name}.{index}"] = chunk
    return metadata


def decode(metadata: Mapping[str, str], *, prefix: str = PREFIX) -> dict[str, str]:
    """
    Return the tags stored in ``metadata``, ignoring every key outside ``prefix``.

    A chunk left over from an earlier, longer value is ignored: the header says how
    many belong to the value. Raises :class:`DamagedTagError` when a header, a chunk or
    the checksum does not hold up, which only a writer other than :func:`encode` causes.
    """
    tags: dict[str, str] = {}
    for key, header in metadata.items():
        name = key.removeprefix(prefix)
        if name == key or "." in name:
            continue
        match = _HEADER.fullmatch(header)
        if match is None:
            raise DamagedTagError(
                f"Metadata key {key[:_QUOTED]!r} holds {header[:_QUOTED]!r}, not a tag header."
            )
        count, checksum = int(match[1]), match[2]
        raw = b"".join(_unescape(metadata, f"{key}.{index}") for index in range(count))
        try:
            value = raw.decode()
        except UnicodeDecodeError as e:
            raise DamagedTagError(
                f"The chunks of metadata key {key!r} do not decode to text."
            ) from e
        if _checksum(value) != checksum:
            raise DamagedTagError(
                f"The chunks of metadata key {key!r} do not match its checksum; something other "
                "than this backend rewrote some of them."
            )
        tags[name] = value
    return tags


def creation_metadata(
    spec: SandboxSpec | None,
    *,
    workdir: str | None,
    lease: float,
    identity: Mapping[str, str],
    deployment: str,
) -> dict[str, str]:
    """Who made a new sandbox, a name to find it by, its lease, and a provisioned one's tags."""
    metadata = {
        **CREATED_BY,
        DEPLOYMENT_KEY: deployment,
        **identity,
        "name": f"airflow-sandbox-{uuid.uuid4().hex[:12]}",
        LEASE_KEY: str(math.ceil(lease)),
    }
    if spec is not None and spec.owner is not None:
        metadata.update(encode(provisioning_tags(spec, workdir=workdir)))
    return metadata


def read(
    sandbox: str, metadata: Mapping[str, str] | None, *, expires_at: datetime | None
) -> dict[str, str]:
    """The tags of ``sandbox`` from its metadata, with the server's expiry for it."""
    try:
        tags = decode(metadata or {})
    except DamagedTagError as e:
        raise SandboxError(
            f"Sandbox {sandbox} carries tags this backend cannot read: {e} Destroy the "
            f"sandbox, or remove its {PREFIX} metadata and provision it again."
        ) from e
    if expires_at is not None:
        # The server's own expiry rather than a stamp: renewals move it, and a stamp
        # would go stale between them.
        tags[EXPIRES_AT_TAG] = str(int(expires_at.timestamp()))
    return tags


def provisioning_tags(spec: SandboxSpec, *, workdir: str | None) -> dict[str, str]:
    """The tags a task attaches to a sandbox provisioned for it by: its owner and what it may do."""
    # No expiry tag: read_tags reads the server's own, which renewals keep moving.
    tags = {OWNER_TAG: str(spec.owner), NETWORK_TAG: encode_network_policy(spec)}
    if workdir is not None:
        tags[WORKDIR_TAG] = workdir
    return tags


def stamped_workdir(metadata: Mapping[str, str] | None, *, default: str | None) -> str | None:
    """The creator's working directory on a provisioned sandbox, else ``default``."""
    try:
        tags = decode(metadata or {})
    except DamagedTagError:
        # attach reports the damage; a reconnect only needs a directory.
        return default
    return tags.get(WORKDIR_TAG) if OWNER_TAG in tags else default


def stamped_lease(metadata: Mapping[str, str] | None, *, default: float) -> float:
    """The lease the sandbox's creator stamped on it, else ``default``."""
    # A sandbox made before leases were stamped, or restamped by hand, has none to read.
    value = (metadata or {}).get(LEASE_KEY, "")
    return float(value) if _LEASE.fullmatch(value) else default


def patch(current: Mapping[str, str], tags: Mapping[str, str]) -> dict[str, str | None]:
    """
    Return the JSON merge patch that turns the tags in ``current`` into exactly ``tags``.

    Keys already holding the right value are left out, so an unchanged tag costs nothing,
    and every key of ours that the new tags no longer use is deleted with ``None``,
    including chunks a damaged or interleaved write left behind.
    """
    wanted = encode(tags)
    changes: dict[str, str | None] = {
        key: value for key, value in wanted.items() if current.get(key) != value
    }
    gone = (key for key in current if key.startswith(PREFIX) and key not in wanted)
    return {**changes, **dict.fromkeys(gone)}


def _chunks(value: str) -> list[str]:
    chunks: list[str] = []
    body = ""
    for byte in value.encode():
        char = chr(byte)
        token = char if char in _ALNUM or char in _INNER_ONLY else f"{_ESCAPE}{byte:02X}"
        # A literal ``-`` or ``_`` reserves the room its escape needs, in case it ends the chunk.
        room = 3 if char in _INNER_ONLY else len(token)
        if len(body) + room > _CHUNK_BODY:
            chunks.append(_close(body))
            body = ""
        body += token
    if body:
        chunks.append(_close(body))
    return chunks


def _close(body: str) -> str:
    if body[-1] in _INNER_ONLY:
        body = f"{body[:-1]}{_ESCAPE}{ord(body[-1]):02X}"
    return _LEAD + body


def _unescape(metadata: Mapping[str, str], key: str) -> bytes:
    chunk = metadata.get(key)
    if chunk is None or not chunk.startswith(_LEAD):
        raise DamagedTagError(f"Metadata key {key[:_QUOTED]!r} is missing or is not a tag chunk.")
    body = chunk[len(_LEAD) :]
    raw = bytearray()
    position = 0
    while position < len(body):
        escaped = _ESCAPED_BYTE.match(body, position)
        if escaped:
            raw.append(int(escaped[1], 16))
            position = escaped.end()
        elif body[position] in _ALNUM or body[position] in _INNER_ONLY:
            raw.append(ord(body[position]))
            position += 1
        else:
            raise DamagedTagError(
                f"Metadata key {key[:_QUOTED]!r} holds {chunk[:_QUOTED]!r}, not a tag chunk."
            )
    return bytes(raw)


def _checksum(value: str) -> str:
    return f"{zlib.crc32(value.encode()):08x}"
