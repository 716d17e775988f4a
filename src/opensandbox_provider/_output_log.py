"""
A command's output in the task log, line by line as it arrives, bounded per line and in all.

The operator and the trigger may feed it a line split anywhere, so each stream's pieces are
joined back into lines here, never holding more than one bounded line per stream. What a command
prints is the guest's, so no line of it can pass for one of the provider's own: each is marked
with its stream, and the controls a terminal would obey (a carriage return that rewrites the
line, an escape sequence that clears the screen) are written out as escapes.
"""

from __future__ import annotations

from typing import Any, Protocol


class TaskLog(Protocol):
    """What of a logger this needs: Airflow's task logger and the standard library's alike."""

    def info(self, message: Any, /, *args: Any) -> Any: ...


# A line is logged up to this many bytes: a minified JSON document or a progress bar
# redrawn without newlines would otherwise be one log record of any size.
MAX_LOGGED_LINE = 16 * 1024
# Every character a terminal may act on rather than print: the C0 controls but tab, DEL, and
# the C1 controls, which some terminals take as the start of an escape sequence as they do ESC.
_CONTROLS = [*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F, *range(0x80, 0xA0)]
_VISIBLE = {code: "\\r" if code == 0x0D else f"\\x{code:02x}" for code in _CONTROLS}
# Past this much output in all, no more lines are logged: a task log is read by people, and
# a command that prints gigabytes has its output bounded by the streams' tails anyway.
MAX_LOGGED_BYTES = 16 * 1024 * 1024


class OutputLog:
    """
    Logs each line of a command's output to ``log``, the task's logger, once it is complete:
    ``max_line`` bytes of it, the rest replaced by a note, and after ``max_total`` bytes in all
    a note that the rest is not logged.
    """

    def __init__(
        self, log: TaskLog, *, max_line: int = MAX_LOGGED_LINE, max_total: int = MAX_LOGGED_BYTES
    ) -> None:
        self._log = log
        self._max_line = max_line
        self._max_total = max_total
        self._lines: dict[str, _PartialLine] = {}
        self.logged = 0
        self.full = False

    def feed(self, stream: str, data: bytes) -> None:
        """Take the next piece of ``stream``'s output and log every line it completes."""
        if self.full:
            return
        line = self._lines.setdefault(stream, _PartialLine(self._max_line))
        start = 0
        while not self.full:
            end = data.find(b"\n", start)
            if end < 0:
                line.add(data[start:])
                return
            line.add(data[start:end])
            self._emit(stream, line)
            start = end + 1

    def close(self) -> None:
        """The output ended: log any last line that had no newline."""
        for stream, line in self._lines.items():
            if line.pending and not self.full:
                self._emit(stream, line)

    def _emit(self, stream: str, line: _PartialLine) -> None:
        data, cut = line.take()
        if self.logged + len(data) > self._max_total:
            self.full = True
            self._log.info(
                "[output past %d bytes is not logged; the command goes on, and its exit code and "
                "the tail of its output are still reported]",
                self._max_total,
            )
            return
        self.logged += len(data)
        text = data.decode("utf-8", errors="replace").translate(_VISIBLE)
        if cut:
            text += f" [line cut at {self._max_line} bytes]"
        self._log.info("[sandbox %s] %s", stream, text)


class _PartialLine:
    """The start of a line not yet ended, up to ``limit`` bytes, and whether more was dropped."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._data = bytearray()
        self._cut = False
        self.pending = False

    def add(self, data: bytes) -> None:
        self.pending = self.pending or bool(data)
        room = self._limit - len(self._data)
        if len(data) > room:
            self._cut = True
            data = data[: max(room, 0)]
        self._data += data

    def take(self) -> tuple[bytes, bool]:
        taken = (bytes(self._data), self._cut)
        self._data.clear()
        self._cut = False
        self.pending = False
        return taken
