"""How the load run and the soak judge an agent run's end, and what its sandboxes left behind."""

from __future__ import annotations

import time

from tests.containers import containers_of

# The errors of the contract (and pydantic-ai's retry, which carries one to the model): a run
# that raised is a clear error when one of these, with a message, is in its chain.
CONTRACT_ERRORS = {"SandboxError", "SandboxTerminalError", "ModelRetry"}
# Destroy returns before Docker has removed the containers.
REMOVAL_SECONDS = 30.0


def judge(run: dict) -> str:
    """succeeded, answered (the agent was told of a failure in a tool's result), clear (raised
    the contract's error with a message) or unclear."""
    if run["outcome"] in ("succeeded", "answered"):
        return run["outcome"]
    for link in run["errors"]:
        if link["type"] in CONTRACT_ERRORS and link["message"].strip():
            return "clear"
    return "unclear"


def left_behind(sandboxes: list[str]) -> dict[str, list[str]]:
    """The sandboxes that still have containers once removal has had its time, and those."""
    deadline = time.monotonic() + REMOVAL_SECONDS
    left = {sandbox: containers_of(sandbox) for sandbox in sandboxes}
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(1)
        left = {sandbox: containers_of(sandbox) for sandbox in sandboxes if left.get(sandbox)}
    return {sandbox: names for sandbox, names in left.items() if names}
