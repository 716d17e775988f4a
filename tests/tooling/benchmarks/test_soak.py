"""The arithmetic and the verdicts behind ``make load`` and ``make soak`` (benchmarks/load.py,
benchmarks/soak.py): a slope that is wrong would call a leak flat, a verdict that is wrong
would call a raw exception a clear error."""

from __future__ import annotations

import ctypes

import pytest

from benchmarks.agent_runs import native_heap
from benchmarks.run_outcomes import judge
from benchmarks.soak import slope_per_10_minutes


def test_a_steady_climb_has_its_slope_per_ten_minutes():
    # One MiB a minute, sampled every 30 s.
    points = [(t, 100 + t / 60) for t in range(0, 1800, 30)]
    assert slope_per_10_minutes(points) == pytest.approx(10.0)


def test_noise_around_a_flat_line_has_a_slope_near_zero():
    points = [(t, 100 + (1 if t % 60 else -1)) for t in range(0, 1800, 30)]
    assert abs(slope_per_10_minutes(points)) < 0.05


def test_too_few_points_have_no_slope():
    assert slope_per_10_minutes([(0, 1), (10, 2)]) is None
    assert slope_per_10_minutes([(5, 1), (5, 2), (5, 3)]) is None


def test_a_run_that_raised_the_contracts_error_with_a_message_is_a_clear_error():
    chain = [
        {"type": "UnexpectedModelBehavior", "message": "Tool exceeded max retries"},
        {"type": "SandboxTerminalError", "message": "Could not run a command: unreachable."},
    ]
    assert judge({"outcome": "raised", "errors": chain}) == "clear"


@pytest.mark.parametrize(
    "chain",
    [
        [{"type": "KeyError", "message": "'id'"}],
        [{"type": "SandboxError", "message": "  "}],
    ],
)
def test_a_raw_exception_or_an_empty_message_is_not_a_clear_error(chain):
    assert judge({"outcome": "raised", "errors": chain}) == "unclear"


def test_runs_that_answered_keep_their_outcome():
    assert judge({"outcome": "succeeded", "answer": "x 42"}) == "succeeded"
    assert judge({"outcome": "answered", "answer": "the command failed"}) == "answered"


def test_the_c_allocators_memory_in_use_counts_a_native_allocation_and_its_release():
    # What the soak judges beside RSS: memory the C allocator hands out counts as in use
    # while it is held, and no longer once it is freed, whatever glibc keeps afterwards.
    if native_heap() is None:
        pytest.skip("this libc gives no mallinfo2 (glibc before 2.33, or not glibc)")
    before, _ = native_heap()
    held = ctypes.create_string_buffer(16 * 1024 * 1024)
    during, _ = native_heap()
    del held
    after, _ = native_heap()
    assert during - before >= 16 * 1024 * 1024
    assert during - after >= 16 * 1024 * 1024
