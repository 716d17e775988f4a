"""What the file and directory endpoints share: Go's error texts and how they are answered."""

import errno
import os

from exchange import FILE_NOT_FOUND, ApiError, runtime_error
from go_encoding import go_path_error
from path_expansion import PathError, expand_absolute_path, expand_path


class FileError(Exception):
    """A filesystem failure with Go's error text; a missing file answers 404, anything else 500."""

    def __init__(self, text: str, missing: bool = False):
        super().__init__(text)
        self.text = text
        self.missing = missing

    @classmethod
    def from_os_error(
        cls, operation: str, path: str, error: OSError, prefix: str = ""
    ) -> "FileError":
        return cls(
            prefix + go_path_error(operation, path, error), isinstance(error, FileNotFoundError)
        )


def file_error_response(error: FileError) -> ApiError:
    """execd's handleFileError (docs/execd-wire.rst, wire-file-errors)."""
    if error.missing:
        return ApiError(404, FILE_NOT_FOUND, f"file not found. {error.text}")
    return runtime_error(f"error accessing file: {error.text}")


def absolute_path_or_file_error(path: str, prefix: str = "") -> str:
    try:
        return expand_absolute_path(path)
    except PathError as error:
        raise FileError(f"{prefix}{error}") from None


def expand_path_or_runtime_error(requested: str, what: str) -> str:
    """A path that cannot be expanded answers a 500 naming what it was for
    (docs/execd-wire.rst, wire-paths)."""
    try:
        return expand_path(requested)
    except PathError as error:
        raise runtime_error(f"error resolving {what} {requested}. {error}") from None


def absolute_root(requested: str) -> str:
    """The root of a listing or a search, made absolute (docs/execd-wire.rst, wire-listing,
    wire-search)."""
    try:
        return expand_absolute_path(requested)
    except PathError as error:
        # execd reports the path it has already overwritten with "" (a Go := shadowing quirk).
        raise runtime_error(f"error converting path  to absolute. {error}") from None


def make_directories(path: str, mode: int = 0o777) -> None:
    """Go's os.MkdirAll (the umask applies)."""
    try:
        os.makedirs(path, mode, exist_ok=True)
    except FileExistsError as error:
        not_a_directory = NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        raise FileError(go_path_error("mkdir", error.filename or path, not_a_directory)) from None
    except OSError as error:
        raise FileError.from_os_error("mkdir", error.filename or path, error) from None
