"""POST /directories, GET /directories/list and DELETE /directories
(docs/execd-wire.rst, wire-mkdir, wire-listing, wire-delete-dirs)."""

import os
import shutil
import stat

from exchange import Exchange, bad_request, runtime_error
from file_info import file_info
from filesystem import (
    FileError,
    absolute_path_or_file_error,
    absolute_root,
    expand_path_or_runtime_error,
    file_error_response,
    make_directories,
)
from go_decode import decode_request_body
from go_encoding import go_parse_int, go_path_error
from permissions import PERMISSIONS_BY_PATH, apply_permission


def create_directories(exchange: Exchange) -> None:
    """MkdirAll, then the leaf (new or already there) gets the mode and ownership
    (docs/execd-wire.rst, wire-mkdir)."""
    for requested, permission in decode_request_body(
        exchange.body(), PERMISSIONS_BY_PATH.decode
    ).items():
        try:
            path = absolute_path_or_file_error(requested)
            make_directories(path)
            apply_permission(path, permission)
        except FileError as error:
            raise file_error_response(error) from None
    exchange.respond_empty()


def list_directory(exchange: Exchange) -> None:
    """The root itself is excluded; absolute paths; depth-first pre-order with each
    directory's entries sorted by name; symlinks are listed but never followed
    (docs/execd-wire.rst, wire-listing)."""
    requested = exchange.required_query_value("path")
    depth = 1
    raw_depth = exchange.query_value("depth")
    if raw_depth:
        depth = go_parse_int(raw_depth)
        if depth is None or depth < 0:
            raise bad_request(f"invalid query parameter 'depth': {raw_depth}")
    root = absolute_root(requested)
    try:
        status = os.lstat(root)
    except OSError as error:
        raise file_error_response(FileError.from_os_error("lstat", root, error)) from None
    if stat.S_ISLNK(status.st_mode):
        raise bad_request(f"path is a symbolic link, refusing to traverse: {root}")
    if not stat.S_ISDIR(status.st_mode):
        raise bad_request(f"path is not a directory: {root}")
    entries: list[dict] = []
    try:
        if depth > 0:
            list_entries(root, 0, depth, entries)
    except OSError as error:
        raise runtime_error(f"error listing directory {root}. {go_os_error_text(error)}") from None
    exchange.respond_json(entries)


def go_os_error_text(error: OSError) -> str:
    return go_path_error(
        "lstat" if isinstance(error, FileNotFoundError) else "open", error.filename, error
    )


def list_entries(directory: str, level: int, max_depth: int, entries: list) -> None:
    """A directory at level d is descended into only while d + 1 < depth."""
    with os.scandir(directory) as scan:
        children = sorted(scan, key=lambda entry: os.fsencode(entry.name))
    for child in children:
        path = os.path.join(directory, child.name)
        entries.append(file_info(path, child.stat(follow_symlinks=False)))
        if child.is_dir(follow_symlinks=False) and level + 1 < max_depth:
            list_entries(path, level + 1, max_depth, entries)


def delete_directories(exchange: Exchange) -> None:
    """RemoveAll of each path (not made absolute); missing paths and plain files are fine
    (docs/execd-wire.rst, wire-delete-dirs)."""
    for requested in exchange.query_values("path"):
        path = expand_path_or_runtime_error(requested, "directory")
        try:
            remove_all(path)
        except OSError as error:
            cause = go_path_error("unlinkat", error.filename or path, error)
            raise runtime_error(f"error removing directory {requested}. {cause}") from None
    exchange.respond_empty()


def remove_all(path: str) -> None:
    """Go's os.RemoveAll: a directory tree, a file or a link; nothing there is not an error."""
    if not path:
        return
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(status.st_mode):
        shutil.rmtree(path)
    else:
        os.remove(path)
