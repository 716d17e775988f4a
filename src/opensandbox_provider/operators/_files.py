"""Files into a sandbox before its command, and out of it after, for the operator."""

from __future__ import annotations

import secrets
from contextlib import suppress
from typing import TYPE_CHECKING

from airflow.providers.common.compat.sdk import AirflowException, Asset, ObjectStoragePath

from opensandbox_provider.operators._assets import storage_path

if TYPE_CHECKING:
    from collections.abc import Mapping

    from opensandbox_provider.sandbox.backend import OpenSandboxBackend


def check_files(
    files: Mapping[str, str | bytes | ObjectStoragePath | Asset], *, max_bytes: int
) -> None:
    """
    Refuse a file of a type that cannot be copied in, or one larger than ``max_bytes``,
    before a sandbox is created for it: a mistake in the Dag then costs no sandbox.

    A stored file is sized by its store, which may not say (a size of 0); its read checks
    the bound again, since the file may also grow before it is read.
    """
    for path, source in files.items():
        if isinstance(source, Asset):
            source = storage_path(source)
        if isinstance(source, ObjectStoragePath):
            _check_size(path, source.stat().st_size, f"{source}", max_bytes)
        else:
            content, origin = _inline(path, source)
            _check_size(path, len(content), origin, max_bytes)


def write_files(
    backend: OpenSandboxBackend,
    sandbox: str,
    files: Mapping[str, str | bytes | ObjectStoragePath | Asset],
    *,
    max_bytes: int,
) -> None:
    """Write each file, text as UTF-8, an :class:`ObjectStoragePath` or an asset by its content."""
    for path, source in files.items():
        backend.write_file(sandbox, path, _content(path, source, max_bytes=max_bytes))


def copy_outputs(
    backend: OpenSandboxBackend,
    sandbox: str,
    outputs: Mapping[str, str | ObjectStoragePath | Asset],
    *,
    max_bytes: int,
) -> dict[str, int]:
    """Copy each sandbox path to its target; return the bytes each one took."""
    return {
        path: _copy_into_place(backend, sandbox, path, storage_path(target), max_bytes=max_bytes)
        for path, target in outputs.items()
    }


def _copy_into_place(
    backend: OpenSandboxBackend,
    sandbox: str,
    path: str,
    destination: ObjectStoragePath,
    *,
    max_bytes: int,
) -> int:
    """
    Stream the file to a sibling of ``destination``, then move it into place: a copy that
    fails part way leaves what was there before, and no part of the new file.
    """
    # A local target's directory may not exist yet; an object store has none to make.
    destination.parent.mkdir(parents=True, exist_ok=True)
    # Random, so that two runs copying to one destination at once never share a partial.
    partial = destination.with_name(f"{destination.name}.{secrets.token_hex(8)}.partial")
    try:
        with partial.open("wb") as stream:
            written = backend.export_file(sandbox, path, stream, max_bytes=max_bytes)
        # What the store holds, not what was sent: a store that kept less fails here.
        stored = partial.stat().st_size
        if stored != written:
            raise AirflowException(
                f"{destination} would hold {stored} bytes of the {written} that {path!r} has; "
                "the copy was not moved into place. Check the storage's free space and retry."
            )
        # Within one store: a rename on a file system, a server-side copy on an object store.
        partial.fs.mv(partial.path, destination.path)
    except BaseException:
        # The copy's own failure is the one the task reports, not a failure to clean up.
        with suppress(Exception):
            partial.unlink(missing_ok=True)
        raise
    return written


def _content(
    path: str, source: str | bytes | ObjectStoragePath | Asset, *, max_bytes: int
) -> bytes:
    if isinstance(source, Asset):
        source = storage_path(source)
    if isinstance(source, ObjectStoragePath):
        with source.open("rb") as stream:
            # One byte past the bound is enough to know it is too large.
            content = stream.read(max_bytes + 1)
        origin = f"{source}"
    else:
        content, origin = _inline(path, source)
    _check_size(path, len(content), origin, max_bytes)
    return content


def _inline(path: str, source: object) -> tuple[bytes, str]:
    """The bytes of text or bytes given in the Dag, and how a message names where they came
    from; anything else is refused."""
    if isinstance(source, str):
        return source.encode("utf-8"), "its text"
    if isinstance(source, bytes):
        return source, "its bytes"
    raise AirflowException(
        f"files[{path!r}] is a {type(source).__name__}; give text, bytes, an "
        "ObjectStoragePath or an Asset to copy in."
    )


def _check_size(path: str, size: int, origin: str, max_bytes: int) -> None:
    if size > max_bytes:
        raise AirflowException(
            f"files[{path!r}] is larger than max_file_bytes ({max_bytes} bytes), read from "
            f"{origin}. Raise max_file_bytes, or fetch the file from inside the sandbox."
        )
