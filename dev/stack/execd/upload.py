"""POST /files/upload: pairs of metadata and file parts of a multipart form
(docs/execd-wire.rst, wire-upload)."""

import email.message
import json
import os
import posixpath
import time

from exchange import (
    INVALID_FILE,
    INVALID_FILE_CONTENT,
    INVALID_FILE_METADATA,
    ApiError,
    Exchange,
    runtime_error,
)
from filesystem import FileError, expand_path_or_runtime_error, make_directories
from go_decode import GO_INT, GO_STRING, GoStruct
from go_encoding import go_path_error
from permissions import apply_permission

FILE_METADATA = GoStruct(
    "FileMetadata", {"path": GO_STRING, "owner": GO_STRING, "group": GO_STRING, "mode": GO_INT}
)
# execd retries a failed chmod once after this long, for slowly-coherent filesystems
# (docs/execd-wire.rst, wire-upload).
PERMISSION_RETRY_DELAY = 0.02


def upload_files(exchange: Exchange) -> None:
    """The i-th metadata part describes the i-th file part; pairs are written in order, with
    no rollback of earlier pairs when a later one fails (docs/execd-wire.rst, wire-upload)."""
    parts = multipart_file_parts(exchange)
    metadata_parts, file_parts = parts.get("metadata", []), parts.get("file", [])
    if not metadata_parts:
        raise ApiError(400, INVALID_FILE_METADATA, "metadata file is missing")
    if not file_parts:
        raise ApiError(400, INVALID_FILE_CONTENT, "file is missing")
    if len(metadata_parts) != len(file_parts):
        raise ApiError(
            400,
            INVALID_FILE,
            f"metadata and file count mismatch: {len(metadata_parts)} vs {len(file_parts)}",
        )
    for raw_metadata, content in zip(metadata_parts, file_parts, strict=True):
        metadata = upload_metadata(raw_metadata)
        path = expand_path_or_runtime_error(metadata["path"], "target path")
        write_upload(path, content)
        apply_upload_permission(path, metadata)
    exchange.respond_empty()


def multipart_file_parts(exchange: Exchange) -> dict[str, list[bytes]]:
    """The parts that carry a filename, by form name, in order (Go's form.File). Parts
    without a filename are form values, which the upload never looks at
    (docs/execd-wire.rst, wire-upload)."""
    header = email.message.Message()
    header["Content-Type"] = exchange.headers.get("Content-Type", "")
    boundary = header.get_param("boundary")
    if header.get_content_type() != "multipart/form-data" or not boundary:
        raise ApiError(400, INVALID_FILE, "multipart form is empty")
    sections = (b"\r\n" + exchange.body()).split(b"\r\n--" + boundary.encode())
    files: dict[str, list[bytes]] = {}
    for section in sections[1:]:
        if section.startswith(b"--"):
            return files
        part = split_part(section)
        if part is None:
            break
        headers = email.message_from_bytes(part[0] + b"\r\n\r\n")
        name = headers.get_param("name", header="content-disposition")
        if name and headers.get_filename() is not None:
            files.setdefault(name, []).append(part[1])
    # A body that never reaches its closing delimiter does not parse at all in Go either.
    raise ApiError(400, INVALID_FILE, "multipart form is empty")


def split_part(section: bytes) -> tuple[bytes, bytes] | None:
    """What follows a delimiter: the rest of its line, then headers, a blank line and content."""
    _rest_of_delimiter_line, _, part = section.partition(b"\r\n")
    if part.startswith(b"\r\n"):
        return b"", part[2:]
    head, separator, content = part.partition(b"\r\n\r\n")
    return (head, content) if separator else None


def upload_metadata(raw: bytes) -> dict:
    try:
        metadata = FILE_METADATA.decode(json.loads(raw))
    except ValueError as error:
        raise ApiError(400, INVALID_FILE_METADATA, f"invalid metadata format. {error}") from None
    if not metadata["path"]:
        raise ApiError(400, INVALID_FILE_METADATA, "metadata path is empty")
    return metadata


def go_dir(path: str) -> str:
    """Go's filepath.Dir: all but the last element, cleaned ("." when nothing is left)."""
    return posixpath.normpath(posixpath.dirname(path) or ".")


def write_upload(path: str, content: bytes) -> None:
    """Parents are created, an existing file is overwritten, and the data is synced
    (docs/execd-wire.rst, wire-upload)."""
    # Go's filepath.Dir cleans what it returns, so the parents made are the path's lexical ones,
    # while the file is opened by the path as given: through a missing directory and "..", the
    # open fails (docs/execd-wire.rst, wire-upload).
    directory = go_dir(path)
    try:
        make_directories(directory)
    except FileError as error:
        raise runtime_error(f"error creating target directory {directory}. {error}") from None
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o777)
    except OSError as error:
        raise runtime_error(
            f"error opening destination file {path}. {go_path_error('open', path, error)}"
        ) from None
    with open(descriptor, "wb") as destination:
        destination.write(content)
        destination.flush()
        os.fsync(destination.fileno())
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    except OSError:
        pass  # some filesystems cannot sync a directory; execd ignores that too
    finally:
        os.close(directory)


def apply_upload_permission(path: str, permission: dict) -> None:
    """A failed chmod or chown is tried once more before the upload fails
    (docs/execd-wire.rst, wire-upload)."""
    try:
        apply_permission(path, permission)
    except FileError:
        time.sleep(PERMISSION_RETRY_DELAY)
        try:
            apply_permission(path, permission)
        except FileError as error:
            raise runtime_error(f"error chmoding file {path}. {error}") from None
