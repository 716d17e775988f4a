"""POST /files/replace: text replaced in files, every occurrence
(docs/execd-wire.rst, wire-replace)."""

import os

from exchange import Exchange, bad_request
from filesystem import FileError, absolute_path_or_file_error, file_error_response
from go_decode import GO_STRING, GoMapOf, GoStruct, decode_request_body

REPLACEMENTS_BY_PATH = GoMapOf(
    GoStruct("ReplaceFileContentItem", {"old": GO_STRING, "new": GO_STRING})
)


def replace_contents(exchange: Exchange) -> None:
    """Every occurrence of old becomes new; ?verbose=true reports the counts
    (docs/execd-wire.rst, wire-replace)."""
    counts = {}
    for requested, item in decode_request_body(
        exchange.body(), REPLACEMENTS_BY_PATH.decode
    ).items():
        try:
            counts[requested] = replace_in_file(requested, item["old"] or "", item["new"] or "")
        except FileError as error:
            raise file_error_response(error) from None
    if exchange.query_value("verbose") == "true":
        exchange.respond_json(
            {path: {"replacedCount": count} for path, count in sorted(counts.items())}
        )
    else:
        exchange.respond_empty()


def replace_in_file(requested: str, old: str, new: str) -> int:
    path = absolute_path_or_file_error(requested)
    try:
        os.stat(path)
    except OSError as error:
        raise FileError.from_os_error("stat", path, error) from None
    try:
        with open(path, "rb") as source:
            content = source.read().decode("utf-8", "surrogateescape")
        if not old:
            raise bad_request("old content must not be empty")
        with open(path, "wb") as destination:
            destination.write(content.replace(old, new).encode("utf-8", "surrogateescape"))
    except OSError as error:
        raise FileError.from_os_error("open", path, error) from None
    return content.count(old)
