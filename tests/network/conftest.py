"""Fixtures of the network tests: listeners on the bridge and the resolver's zone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dev.stack.resolver import ALLOWED_NAME, OTHER_NAME, WILDCARD_NAME
from dev.stack.state import StackState
from tests.network.sandboxes import Listener


@pytest.fixture
def listener(stack: StackState) -> Iterator[Listener]:
    bound = Listener(stack.bridge_ip)
    yield bound
    bound.close()


@pytest.fixture
def second_listener(stack: StackState) -> Iterator[Listener]:
    bound = Listener(stack.bridge_ip)
    yield bound
    bound.close()


@pytest.fixture(scope="session")
def zone(stack: StackState) -> dict[str, str]:
    """The resolver's zone; the tests' names must resolve to the bridge and nowhere else."""
    names = stack.resolver["zone"]
    for name in (ALLOWED_NAME, OTHER_NAME, WILDCARD_NAME):
        assert names.get(name) == stack.bridge_ip, (
            f"The stack's resolver does not map {name} to {stack.bridge_ip}; restart the "
            "stack with dev.stack.resolver's DEFAULT_ZONE (`make stack-down stack-up`)."
        )
    return names
