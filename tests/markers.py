"""Markers that several test folders share."""

import pytest

# The execd stand-in can stall its own streams on demand (OPENSANDBOX_TEST_STALL, documented in
# its entry module); the real execd has no such switch, so these tests run on the stand-in only.
# A frozen container (tests/containers.py) is the stall that runs on both.
NEEDS_STALL_SWITCH = pytest.mark.stand_in_only(
    "execd", reason="it stalls the stream with the execd stand-in's test-only switch"
)
