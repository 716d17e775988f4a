"""GET /files/info, DELETE /files and POST /files/mv (docs/execd-wire.rst, wire-info,
wire-delete-files, wire-move)."""

import os
import stat

from exchange import Exchange, runtime_error
from file_info import file_info
from filesystem import FileError, absolute_path_or_file_error, file_error_response, make_directories
from go_decode import GO_STRING, GoSliceOf, GoStruct, decode_request_body
from go_encoding import go_errno_text, go_path_error

RENAME_FILE_ITEMS = GoSliceOf(GoStruct("RenameFileItem", {"src": GO_STRING, "dest": GO_STRING}))


def files_info(exchange: Exchange) -> None:
    """Keyed by each path exactly as requested; lstat-based; the first missing path fails
    the whole request (docs/execd-wire.rst, wire-info)."""
    infos = {}
    for requested in exchange.query_values("path"):
        try:
            infos[requested] = requested_file_info(requested)
        except FileError as error:
            raise file_error_response(error) from None
    exchange.respond_json(dict(sorted(infos.items())))


def requested_file_info(requested: str) -> dict:
    path = absolute_path_or_file_error(requested, f"invalid path {requested}: ")
    try:
        return file_info(path, os.lstat(path))
    except FileNotFoundError as error:
        raise FileError(
            f"file not found: {requested}: {go_path_error('lstat', path, error)}", True
        ) from None
    except OSError as error:
        raise FileError(
            f"error accessing file {requested}: {go_path_error('lstat', path, error)}"
        ) from None


def delete_files(exchange: Exchange) -> None:
    """A missing path is fine; a directory (or a link to one) is a 500
    (docs/execd-wire.rst, wire-delete-files)."""
    for requested in exchange.query_values("path"):
        try:
            delete_file(requested)
        except FileError as error:
            raise runtime_error(f"error removing file {requested}. {error}") from None
    exchange.respond_empty()


def delete_file(requested: str) -> None:
    path = absolute_path_or_file_error(requested, "invalid path: ")
    try:
        followed = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise FileError.from_os_error("stat", path, error) from None
    if stat.S_ISDIR(followed.st_mode):
        raise FileError(f"path is a directory: {requested}")
    try:
        os.remove(path)
    except OSError as error:
        raise FileError.from_os_error("remove", path, error, "failed to remove file: ") from None


def move_files(exchange: Exchange) -> None:
    """Parents of dest are created; an existing dest is an error, never overwritten
    (docs/execd-wire.rst, wire-move)."""
    for item in decode_request_body(exchange.body(), RENAME_FILE_ITEMS.decode):
        try:
            move_file(item["src"] or "", item["dest"] or "")
        except FileError as error:
            raise file_error_response(error) from None
    exchange.respond_empty()


def move_file(requested_source: str, requested_destination: str) -> None:
    source = absolute_path_or_file_error(requested_source, "invalid source path: ")
    destination = absolute_path_or_file_error(requested_destination, "invalid destination path: ")
    try:
        os.stat(source)
    except FileNotFoundError as error:
        raise FileError(
            f"source path not found: {requested_source}: {go_path_error('stat', source, error)}",
            True,
        ) from None
    except OSError:
        pass  # execd only checks for absence here; rename reports anything else
    try:
        make_directories(os.path.dirname(destination), 0o755)
    except FileError as error:
        raise FileError(f"failed to create destination directory: {error}", error.missing) from None
    if os.path.exists(destination):
        raise FileError(f"destination path already exists: {requested_destination}")
    try:
        os.rename(source, destination)
    except OSError as error:
        raise FileError(
            f"failed to rename file: rename {source} {destination}: {go_errno_text(error)}",
            isinstance(error, FileNotFoundError),
        ) from None
