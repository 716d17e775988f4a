"""
What the backend refuses in its own arguments and in a spec, before it asks the server.

The constructor's checks run when the DAG is parsed, so a mistake fails there rather than in
the first task that creates a sandbox.
"""

from __future__ import annotations

import math
import posixpath
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxTerminalError

from opensandbox_provider.sandbox._limits import validate_positive_finite
from opensandbox_provider.sandbox._resources import quantity

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow.providers.common.ai.sandbox.base import SandboxSpec

# The shortest sandbox lifetime the OpenSandbox server accepts; it refuses shorter with a 422.
MIN_SANDBOX_TIMEOUT = 60.0


def check_backend(
    *, image: str, cpu: str, memory: str, lease: float, lease_name: str, ready_timeout: float
) -> None:
    """Refuse what the server would refuse, or what could never create a sandbox. ``lease`` is
    the argument its owner calls ``lease_name`` (``sandbox_timeout``, a pool's ``idle_lease``)."""
    for value, label in ((image, "image"), (cpu, "cpu"), (memory, "memory")):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{label} must be a non-empty string, got {value!r}.")
    quantity(cpu, "cpu")
    quantity(memory, "memory")
    validate_positive_finite(lease, lease_name)
    validate_positive_finite(ready_timeout, "ready_timeout")
    if lease < MIN_SANDBOX_TIMEOUT:
        raise ValueError(
            f"{lease_name} must be at least {MIN_SANDBOX_TIMEOUT:g} seconds, got {lease!r}: "
            "the OpenSandbox server refuses shorter lifetimes."
        )


def check_command(command: str, timeout: float) -> None:
    """Refuse a command no sandbox could run, before anything is asked of the server."""
    validate_positive_finite(timeout, "timeout")
    if not command.strip():
        raise SandboxError("The command is empty; give a shell command to run.")


def working_directory(workdir: str | None) -> str | None:
    """``workdir`` normalised, refusing anything but an absolute path on one line."""
    if workdir is None:
        return None
    if not isinstance(workdir, str) or not posixpath.isabs(workdir) or "\n" in workdir:
        raise ValueError(
            f"workdir must be an absolute path in the sandbox, such as '/home/agent/work', got "
            f"{workdir!r}."
        )
    return posixpath.normpath(workdir)


def snapshot_id(snapshot: str | None) -> str | None:
    """``snapshot`` as the server takes it, refusing an empty or non-string id."""
    if snapshot is None:
        return None
    if not isinstance(snapshot, str) or not snapshot.strip():
        raise ValueError(
            f"snapshot must be the id of a snapshot on the server, as prepare_snapshot returns "
            f"it, got {snapshot!r}."
        )
    return snapshot.strip()


def age(value: timedelta | float | None, name: str, *, none_means: str) -> timedelta | None:
    """
    ``value`` as a ``timedelta``: a positive ``timedelta``, or a positive number of seconds.
    ``None`` stays ``None``, which ``none_means`` says the meaning of in the refusal.
    """
    if value is None:
        return None
    if isinstance(value, timedelta):
        if value > timedelta(0):
            return value
    # True passes every arithmetic test as 1, but is always a caller's mistake here.
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value) and value > 0:
            try:
                return timedelta(seconds=value)
            except OverflowError:
                pass
    raise ValueError(
        f"{name} is {value!r}; give a positive timedelta, such as timedelta(days=7), or a "
        f"positive number of seconds, or None, which {none_means}."
    )


def environment(spec: SandboxSpec | None) -> dict[str, str] | None:
    """The spec's environment as the server takes it, or ``None`` when it sets none."""
    if spec is None or not spec.env:
        return None
    env: Mapping[str, Any] = spec.env
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or not isinstance(value, str):
            raise SandboxTerminalError(
                f"SandboxSpec.env holds {key!r}: {value!r}; every name must be a non-empty string "
                "without '=' and every value a string."
            )
    return dict(env)
