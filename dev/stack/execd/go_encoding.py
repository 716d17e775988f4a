"""Go's encodings: what execd's JSON, strings, times, numbers and errors look like on the wire."""

import json
import os
import re
from datetime import datetime

_GO_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}

# Go's names for signals, as in an *exec.ExitError's text ("signal: killed")
# (docs/execd-wire.rst, wire-exit).
# fmt: off
GO_SIGNAL_NAMES = {
    1: "hangup", 2: "interrupt", 3: "quit", 4: "illegal instruction", 5: "trace/breakpoint trap",
    6: "aborted", 7: "bus error", 8: "floating point exception", 9: "killed",
    10: "user defined signal 1", 11: "segmentation fault", 12: "user defined signal 2",
    13: "broken pipe", 14: "alarm clock", 15: "terminated", 16: "stack fault",
    17: "child exited", 18: "continued", 19: "stopped (signal)", 20: "stopped",
    21: "stopped (tty input)", 22: "stopped (tty output)", 23: "urgent I/O condition",
    24: "CPU time limit exceeded", 25: "file size limit exceeded", 26: "virtual timer expired",
    27: "profiling timer expired", 28: "window changed", 29: "I/O possible",
    30: "power failure", 31: "bad system call",
}
# fmt: on


def go_json(value) -> bytes:
    """Go's json.Marshal: compact, raw UTF-8, with <, >, &, U+2028 and U+2029 escaped
    (docs/execd-wire.rst, wire-framing)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # One str.replace per character rather than a regex: a 1 GiB line is scanned in a fraction of
    # a second instead of seconds, during which no other thread (the heartbeat) can run.
    for character, escape in _GO_JSON_ESCAPES.items():
        text = text.replace(character, escape)
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Bytes that are not UTF-8 (a file name, a line of output) reach us as surrogate escapes.
        # Go writes the six-character escape \ufffd for each such byte, while a real U+FFFD in
        # the text stays raw UTF-8 (docs/execd-wire.rst, wire-framing).
        return _RAW_BYTE.sub(r"\\ufffd", text).encode()


# What surrogateescape makes of a byte that is not UTF-8: one code point per byte.
_RAW_BYTE = re.compile("[\udc80-\udcff]")


def go_string(data: bytes) -> str:
    """Output bytes as text for go_json, which writes Go's \\ufffd for each byte that is not
    UTF-8 (docs/execd-wire.rst, wire-framing)."""
    return data.decode("utf-8", "surrogateescape")


def go_time(nanoseconds: int) -> str:
    """A Go time.Time in JSON: RFC 3339, nanoseconds without trailing zeros, local zone
    (docs/execd-wire.rst, wire-errors)."""
    seconds, fraction = divmod(nanoseconds, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds).astimezone()
    offset = moment.strftime("%z")
    zone = "Z" if offset in ("+0000", "-0000") else f"{offset[:3]}:{offset[3:]}"
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{fraction:09d}".rstrip("0").rstrip(".") + zone


def go_parse_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): an optional sign and decimal digits, nothing else."""
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) and abs(int(text)) < 2**63 else None


def go_errno_text(error: OSError) -> str:
    """Go's text for an errno: the C library's, lower-cased ("no such file or directory")."""
    text = os.strerror(error.errno) if error.errno else str(error)
    return text[:1].lower() + text[1:]


def go_path_error(operation: str, path: str, error: OSError) -> str:
    """Go's *fs.PathError text: "stat /x: no such file or directory"."""
    return f"{operation} {path}: {go_errno_text(error)}"


def exit_outcome(returncode: int) -> tuple[int, str]:
    """Go's ExitCode() (-1 for a signal) and error text ("exit status 3")
    (docs/execd-wire.rst, wire-exit)."""
    if returncode < 0:
        number = -returncode
        return -1, "signal: " + GO_SIGNAL_NAMES.get(number, f"signal {number}")
    return returncode, f"exit status {returncode}"
