"""GET /files/download: a whole file, or one byte range of it (docs/execd-wire.rst, wire-download,
wire-range)."""

import email.utils
import os
import urllib.parse

from byte_ranges import NO_OVERLAP, InvalidRange, execd_ranges, serve_content_ranges
from exchange import UNKNOWN, Exchange
from filesystem import FileError, expand_path_or_runtime_error, file_error_response
from go_encoding import go_json


def download_file(exchange: Exchange) -> None:
    """200 for the whole file, 206 for the first satisfiable range only, 416 otherwise
    (docs/execd-wire.rst, wire-download, wire-range)."""
    path = expand_path_or_runtime_error(exchange.required_query_value("path"), "file path:")
    try:
        source = open(path, "rb")
    except OSError as error:
        raise file_error_response(FileError.from_os_error("open", path, error)) from None
    with source:
        status = os.fstat(source.fileno())
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Disposition": content_disposition(os.path.basename(path)),
        }
        range_header = exchange.headers.get("Range", "")
        if range_header:
            try:
                ranges = execd_ranges(range_header, status.st_size)
            except InvalidRange:
                respond_broken_range_error(exchange, headers, status.st_size)
                return
            if ranges:
                respond_range(exchange, headers, source, ranges[0], status.st_size)
                return
        serve_content(exchange, headers, source, status, range_header)


def content_disposition(name: str) -> str:
    """Non-ASCII names are percent-escaped (Go's url.PathEscape) and given as filename*
    (docs/execd-wire.rst, wire-download)."""
    if name.isascii():
        return f'attachment; filename="{name}"'
    escaped = urllib.parse.quote(name, safe="$&+,;=:@")
    return f"attachment; filename=\"{escaped}\"; filename*=UTF-8''{escaped}"


def respond_range(
    exchange: Exchange, headers: dict, source, byte_range: tuple[int, int], size: int
) -> None:
    start, length = byte_range
    headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{size}"
    source.seek(start)
    exchange.respond_stream(206, headers, source, length)


def respond_broken_range_error(exchange: Exchange, headers: dict, size: int) -> None:
    """For a Range execd cannot parse it writes a 416 JSON error {"code":"UNKNOWN"} after
    having declared the file's size as Content-Length, so the body is dropped when it does not fit
    and the connection closes short: the SDK sees a broken response, not a 416
    (docs/execd-wire.rst, wire-range)."""
    payload = go_json({"code": UNKNOWN})
    exchange.respond_declared(
        416, {**headers, "Content-Length": str(size)}, payload if len(payload) <= size else b""
    )


def serve_content(
    exchange: Exchange, headers: dict, source, status: os.stat_result, range_header: str
) -> None:
    """Go's http.ServeContent, reached with no Range or with one execd found nothing to
    serve in: 416 text/plain with "bytes */size" when no range overlaps (200 for an empty file)
    (docs/execd-wire.rst, wire-range)."""
    size = status.st_size
    headers["Last-Modified"] = email.utils.formatdate(status.st_mtime, usegmt=True)
    try:
        ranges = serve_content_ranges(range_header, size)
    except InvalidRange as error:
        if str(error) == NO_OVERLAP and size == 0:
            ranges = []
        else:
            del headers["Last-Modified"]
            if str(error) == NO_OVERLAP:
                headers["Content-Range"] = f"bytes */{size}"
            exchange.respond_text(416, str(error), headers)
            return
    headers["Accept-Ranges"] = "bytes"
    if len(ranges) == 1:
        respond_range(exchange, headers, source, ranges[0], size)
        return
    exchange.respond_stream(200, headers, source, size)
