"""The test-only stall switch (documented in the header of __main__.py); not an execd feature."""

import os

STALL_VARIABLE = "OPENSANDBOX_TEST_STALL"


class Stall:
    """Which events a stalled command stream still lets through."""

    MODES = ("", "silent", "heartbeat")

    def __init__(self, mode: str):
        self.mode = mode

    @property
    def active(self) -> bool:
        return bool(self.mode)

    def lets_through(self, kind: str, events_sent: int) -> bool:
        if events_sent == 0 or not self.mode:
            return True
        return self.mode == "heartbeat" and kind == "ping"

    def problem(self) -> str:
        """Why execd must not start with this switch, or "" when it may."""
        if self.mode in self.MODES:
            return ""
        return (
            f"{STALL_VARIABLE}={self.mode!r} is not a stall mode; "
            "set it to 'silent' or 'heartbeat', or unset it."
        )


STALL = Stall(os.environ.get(STALL_VARIABLE, ""))
