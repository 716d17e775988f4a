"""
What the operator refuses among its arguments when the Dag is parsed.

Each argument checked here is either never templated or checked only where it is no
template, so a mistake fails the Dag's import, where its author sees it, rather than the
first run of the task. A value still to be rendered is checked by the task once it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.providers.common.compat.sdk import Asset, ObjectStoragePath, XComArg

from opensandbox_provider.egress._policy import allowed_targets
from opensandbox_provider.sandbox._limits import validate_positive_finite


def seconds(value: Any, name: str) -> float:
    """``value`` as a number of seconds above zero, refusing anything else by ``name``."""
    # Text such as "60" would pass every later comparison only by accident, or raise a
    # TypeError that names no argument.
    if not isinstance(value, int | float):
        raise ValueError(f"{name} must be a positive finite number of seconds, got {value!r}.")
    validate_positive_finite(value, name)
    return value


def exit_codes(value: int | Iterable[int] | None) -> frozenset[int]:
    """``skip_on_exit_code`` as a set of exit codes, refusing what holds anything else."""
    if value is None:
        return frozenset()
    # A string is iterable, so "99" would otherwise become the set of its characters.
    codes = list(value) if isinstance(value, Iterable) and not isinstance(value, str) else [value]
    if any(isinstance(code, bool) or not isinstance(code, int) for code in codes):
        raise ValueError(
            f"skip_on_exit_code must be an exit code or a list of them, such as 99 or "
            f"[99, 100], got {value!r}."
        )
    return frozenset(codes)


def check_file_sources(files: Mapping[Any, Any]) -> None:
    """Refuse a file whose path is no text, or whose content cannot be copied in."""
    for path, source in files.items():
        if not isinstance(path, str):
            raise ValueError(
                f"files has the path {path!r}; each key must be a path in the sandbox, as text."
            )
        # An upstream task's output is rendered into the mapping when the task runs, and
        # checked then.
        if not isinstance(source, str | bytes | ObjectStoragePath | Asset | XComArg):
            raise ValueError(
                f"files[{path!r}] is a {type(source).__name__}; give text, bytes, an "
                "ObjectStoragePath or an Asset to copy in."
            )


def check_spec(spec: SandboxSpec) -> None:
    """Refuse a spec whose network fields no sandbox could be created with."""
    if not isinstance(spec, SandboxSpec):
        raise ValueError(
            f"spec must be a SandboxSpec, such as SandboxSpec(block_network=False), got {spec!r}."
        )
    allowed_targets(spec)
