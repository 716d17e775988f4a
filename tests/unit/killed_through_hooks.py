"""
Kills recorded by a test's stand-in for the hook: every kill of a sandbox goes through the
server's lifecycle client (``sandbox/_lifecycle.py``), which is made of a hook's connection
config, so a stand-in gives itself as that config and records the kill as the hook would.
"""

from __future__ import annotations

from typing import Any

import pytest


class _KillingClient:
    """The lifecycle client made of a stand-in hook: its kills are the stand-in's."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook

    def kill_sandbox(self, sandbox: str) -> None:
        self.hook.kill_sandbox(sandbox)

    def close(self) -> None:
        """Nothing to close: the stand-in holds no connection."""


def killed_through_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make each lifecycle client of the stand-in hook its ``connection_config`` is."""
    from opensandbox.sync.manager import SandboxManagerSync

    monkeypatch.setattr(SandboxManagerSync, "create", staticmethod(_KillingClient))
