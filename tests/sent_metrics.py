"""What the provider asked Airflow's ``Stats`` to send, recorded in place of ``Stats``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from airflow.providers.common.compat import sdk as compat_sdk


class Recorder:
    """What ``Stats`` was asked to send, as (kind, name, value, tags)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any, dict[str, str]]] = []

    def incr(self, name: str, count: int, *, tags: dict[str, str]) -> None:
        self.sent.append(("incr", name, count, tags))

    def timing(self, name: str, dt: timedelta, *, tags: dict[str, str]) -> None:
        self.sent.append(("timing", name, dt, tags))

    def names(self) -> list[str]:
        return [name for _, name, _, _ in self.sent]


def recording(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """A recorder put where the provider looks ``Stats`` up, until the test ends."""
    recorder = Recorder()
    monkeypatch.setattr(compat_sdk, "Stats", recorder, raising=False)
    return recorder
