"""GET /files/search: files under a directory whose base name matches a pattern
(docs/execd-wire.rst, wire-search)."""

import os
import stat

from exchange import Exchange, runtime_error
from file_info import file_info
from filesystem import FileError, absolute_root, file_error_response
from glob_match import BaseNameMatcher
from go_encoding import go_path_error


def search_files(exchange: Exchange) -> None:
    """Every non-directory under path whose base name matches, in lexical walk order
    (docs/execd-wire.rst, wire-search)."""
    root = absolute_root(exchange.required_query_value("path"))
    try:
        os.stat(root)
    except OSError as error:
        raise file_error_response(FileError.from_os_error("stat", root, error)) from None
    matcher = BaseNameMatcher(exchange.query_value("pattern") or "**")
    try:
        found = [
            file_info(path, status)
            for path, status in walk(root)
            if matcher.matches(os.path.basename(path))
        ]
    except FileError as error:
        raise runtime_error(f"error searching files. {error}") from None
    exchange.respond_json(found)


def walk(root: str):
    """Go's filepath.Walk: lstat-based, lexical order, directories are descended (and skipped by
    the search), entries that vanish meanwhile are ignored."""
    try:
        status = os.lstat(root)
    except FileNotFoundError:
        return
    except OSError as error:
        raise FileError(
            f"error accessing path {root}: {go_path_error('lstat', root, error)}"
        ) from None
    if not stat.S_ISDIR(status.st_mode):
        yield root, status
        return
    try:
        names = sorted(os.listdir(root), key=os.fsencode)
    except OSError as error:
        raise FileError(
            f"error accessing path {root}: {go_path_error('open', root, error)}"
        ) from None
    for name in names:
        yield from walk(os.path.join(root, name))
