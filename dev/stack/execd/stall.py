"""The test-only stall switch (documented in the header of __main__.py); not an execd feature."""

import os
import threading
import time

# How long a held ping waits for the stall to end before it is answered anyway.
PING_HOLD_S = 120.0

STALL_VARIABLE = "OPENSANDBOX_TEST_STALL"


class Stall:
    """Which events a stalled command stream still lets through."""

    MODES = ("", "silent", "heartbeat")

    def __init__(self, mode: str):
        self.mode = mode
        self._silent_streams = 0
        self._changed = threading.Condition()

    @property
    def active(self) -> bool:
        return bool(self.mode)

    def lets_through(self, kind: str, events_sent: int) -> bool:
        if events_sent == 0 or not self.mode:
            return True
        return self.mode == "heartbeat" and kind == "ping"

    def stream_opened(self) -> None:
        """A silent stall stands for a frozen execd: while one of its streams is open, a ping
        goes unanswered too, as it would from a frozen sandbox."""
        if self.mode == "silent":
            with self._changed:
                self._silent_streams += 1

    def stream_closed(self) -> None:
        if self.mode == "silent":
            with self._changed:
                self._silent_streams -= 1
                self._changed.notify_all()

    def hold_ping(self) -> None:
        """Returns at once, or once no silent stream is open (at most PING_HOLD_S later)."""
        deadline = time.monotonic() + PING_HOLD_S
        with self._changed:
            while self._silent_streams > 0 and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)

    def problem(self) -> str:
        """Why execd must not start with this switch, or "" when it may."""
        if self.mode in self.MODES:
            return ""
        return (
            f"{STALL_VARIABLE}={self.mode!r} is not a stall mode; "
            "set it to 'silent' or 'heartbeat', or unset it."
        )


STALL = Stall(os.environ.get(STALL_VARIABLE, ""))
