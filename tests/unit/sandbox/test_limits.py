"""Our argument checks and export deadline answer exactly as common-ai's private ones do.

The provider restates them instead of importing common-ai's private names; these tests
compare the two, so a common-ai release that changes its values or messages shows here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox import base as sandbox_base
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.sandbox._limits import (
    byte_budget,
    check_export_deadline,
    export_allowance,
    validate_positive_finite,
)

BAD_VALUES: list[Any] = [
    0,
    0.0,
    -1,
    -0.5,
    math.nan,
    math.inf,
    -math.inf,
    True,
    False,
    "10",
    "",
    None,
    [1],
]
GOOD_VALUES: list[Any] = [1, 0.001, 3600.0, 2**40, 1e300]
SIZES = [0, 1, 1024, 64 * 1024 * 1024, 126 * 1024 * 1024, 1024**3, 10 * 1024**3, 2**63]


def common_ai(name: str) -> Callable[..., Any]:
    """common-ai's private helper ``name``, or a failure saying what to re-check."""
    helper = getattr(sandbox_base, name, None)
    if helper is None:
        pytest.fail(
            f"common-ai no longer has sandbox.base.{name}, which "
            "opensandbox_provider.sandbox._limits restates: compare ours with what common-ai "
            "does now, then point this test at it.",
            pytrace=False,
        )
    return helper


def raised(check: Callable[..., Any], *args: Any) -> tuple[type[BaseException], str] | None:
    try:
        check(*args)
    except Exception as e:
        return type(e), str(e)
    return None


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Set what ``time.monotonic`` answers, for ours and common-ai's alike."""

    def set_now(now: float) -> None:
        monkeypatch.setattr(time, "monotonic", lambda: now)

    set_now(1000.0)
    return set_now


@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
def test_a_bad_number_is_refused_with_common_ais_exception_and_message(value: Any) -> None:
    ours = raised(validate_positive_finite, value, "timeout")
    assert ours is not None
    assert ours == raised(common_ai("_validate_positive_finite"), value, "timeout")


@pytest.mark.parametrize("value", GOOD_VALUES, ids=repr)
def test_a_positive_finite_number_is_accepted_as_common_ai_accepts_it(value: Any) -> None:
    assert raised(validate_positive_finite, value, "max_bytes") is None
    assert raised(common_ai("_validate_positive_finite"), value, "max_bytes") is None


@pytest.mark.parametrize("max_bytes", SIZES)
def test_the_export_deadline_is_common_ais(
    max_bytes: int, frozen_clock: Callable[[float], None]
) -> None:
    assert time.monotonic() + export_allowance(max_bytes) == common_ai("_export_deadline")(
        max_bytes
    )


@pytest.mark.parametrize("max_bytes", SIZES)
@pytest.mark.parametrize("late_by", [-1.0, 0.0, 0.001, 5000.0])
def test_an_overrun_export_is_ended_with_common_ais_message(
    max_bytes: int, late_by: float, frozen_clock: Callable[[float], None]
) -> None:
    deadline = time.monotonic() + export_allowance(max_bytes)
    frozen_clock(deadline + late_by)
    ours = raised(check_export_deadline, "/tmp/out.bin", deadline, max_bytes)
    assert ours == raised(common_ai("_check_export_deadline"), "/tmp/out.bin", deadline, max_bytes)
    assert (ours is not None) == (late_by > 0)
    if ours is not None:
        assert ours[0] is SandboxError


@pytest.mark.parametrize(
    ("value", "whole"), [(0.5, 1), (0.001, 1), (1, 1), (100.2, 101), (2**40, 2**40)]
)
def test_a_byte_budget_is_whole_bytes_rounded_up_never_down_to_no_bound(value, whole) -> None:
    assert byte_budget(value, "max_output_bytes") == whole


@pytest.mark.parametrize("value", BAD_VALUES)
def test_a_byte_budget_refuses_what_the_contracts_check_refuses(value) -> None:
    with pytest.raises((ValueError, TypeError)):
        byte_budget(value, "max_output_bytes")
