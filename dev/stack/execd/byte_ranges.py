"""The two Range parsers a download meets: execd's own, then Go's http.ServeContent's
(docs/execd-wire.rst, wire-range)."""

from go_encoding import go_parse_int

NO_OVERLAP = "invalid range: failed to overlap"


class InvalidRange(Exception):
    """A Range header a parser rejects; ServeContent's message says why."""


def execd_ranges(header: str, size: int) -> list[tuple[int, int]]:
    """execd's ParseRange. (start, length) pairs; ranges starting at or past the end are
    dropped and ends are clipped to the file (docs/execd-wire.rst, wire-range)."""
    if not header.startswith("bytes="):
        raise InvalidRange
    ranges = []
    for spec in header[len("bytes=") :].split(","):
        spec = spec.strip()
        if not spec:
            continue
        if "-" not in spec:
            raise InvalidRange
        first, last = (part.strip() for part in spec.split("-", 1))
        if not first:
            suffix = go_parse_int(last)
            if suffix is None or suffix < 0:
                raise InvalidRange
            start = size - min(suffix, size)
            length = size - start
        else:
            start = go_parse_int(first)
            if start is None or start < 0:
                raise InvalidRange
            if not last:
                length = size - start
            else:
                end = go_parse_int(last)
                if end is None or end < start:
                    raise InvalidRange
                length = end - start + 1
        if start >= size:
            continue
        ranges.append((start, min(length, size - start)))
    return ranges


def serve_content_ranges(header: str, size: int) -> list[tuple[int, int]]:
    """Go's net/http parseRange, as far as execd lets ServeContent see it."""
    if not header:
        return []
    if not header.startswith("bytes="):
        raise InvalidRange("invalid range")
    ranges, no_overlap = [], False
    for spec in header[len("bytes=") :].split(","):
        spec = spec.strip(" \t")
        if not spec:
            continue
        first, separator, last = spec.partition("-")
        first, last = first.strip(" \t"), last.strip(" \t")
        if not separator:
            raise InvalidRange("invalid range")
        if not first:
            suffix = go_parse_int(last) if last and last[0] != "-" else None
            if suffix is None or suffix < 0:
                raise InvalidRange("invalid range")
            start = size - min(suffix, size)
            ranges.append((start, size - start))
            continue
        start = go_parse_int(first)
        if start is None or start < 0:
            raise InvalidRange("invalid range")
        if start >= size:
            no_overlap = True
            continue
        end = size - 1
        if last:
            end = go_parse_int(last)
            if end is None or start > end:
                raise InvalidRange("invalid range")
            end = min(end, size - 1)
        ranges.append((start, end - start + 1))
    if no_overlap and not ranges:
        raise InvalidRange(NO_OVERLAP)
    return [] if sum(length for _, length in ranges) > size else ranges[:1]
