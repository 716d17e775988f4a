"""Calls that must come back: a hung call fails its test instead of holding the run forever."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

from tests.containers import wait_until_running

T = TypeVar("T")
CAP = 50 * 1024


class Pending:
    """A call running on a daemon thread; ``result`` waits for it up to a deadline."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._outcome: dict = {}
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], T]) -> None:
        try:
            self._outcome["value"] = call()
        except BaseException as error:  # handed to the test thread as it is
            self._outcome["error"] = error

    def result(self, deadline: float, what: str):
        """The call's value, re-raising its exception; a test failure if it is still running."""
        self._thread.join(deadline)
        if self._thread.is_alive():
            pytest.fail(f"{what} did not come back within {deadline:g} s; it hangs.")
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["value"]

    def outcome(self, deadline: float, what: str) -> tuple[object, BaseException | None]:
        """(value, None) or (None, exception): for a test that accepts either."""
        try:
            return self.result(deadline, what), None
        except pytest.fail.Exception:
            raise
        except Exception as error:
            return None, error


def within(deadline: float, what: str, call: Callable[[], T]) -> T:
    return Pending(call).result(deadline, what)


def long_command(backend, handle: str, seconds: int, container: str) -> Pending:
    """``sleep`` then ``echo finished`` on its way, returned once the engine shows it running.

    Seen from the engine rather than from execd, so a fault injected next lands mid-command and
    not before the command has started.
    """
    running = Pending(
        lambda: backend.run_command(
            handle, f"sleep {seconds}; echo finished", timeout=seconds + 60, max_output_bytes=CAP
        )
    )
    wait_until_running(container, f"sleep {seconds}")
    return running
