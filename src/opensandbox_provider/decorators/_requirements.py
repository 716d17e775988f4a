"""
A decorated function's ``requirements``: a virtual environment holding them, installed once in
a prepared snapshot named for a hash of its inputs, which every later run of the same inputs
starts from, on any worker (docs/decorator.rst, "Its packages, by name: ``requirements``").
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import timedelta

from airflow.providers.common.ai.sandbox.base import SandboxSpec

# Where the environment lives in the snapshot: outside any workdir a task may use.
VENV = "/opt/airflow-opensandbox-venv"
VENV_PYTHON = f"{VENV}/bin/python"

_NO_PYTHON = (
    "requirements need python3 or python on the image's PATH to make a virtual environment "
    "with; use an image with Python, such as python:3.12-slim."
)


def set_up_commands(requirements: Sequence[str], pip_args: Sequence[str]) -> list[str]:
    """The commands that make the environment: a venv, then one pip install of them all."""
    make = (
        "python=$(command -v python3 || command -v python) || "
        f"{{ echo {shlex.quote(_NO_PYTHON)} >&2; exit 127; }}; "
        f'"$python" -m venv {VENV}'
    )
    pip = [VENV_PYTHON, "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
    return [make, shlex.join([*pip, "--no-cache-dir", *pip_args, *requirements])]


def checked_requirements(
    requirements: Sequence[str] | None,
    pip_args: Sequence[str] | None,
    setup_spec: SandboxSpec | None,
    snapshot_max_age: timedelta | float | None = None,
) -> tuple[list[str], list[str]]:
    """``requirements`` and ``pip_args`` as lists, or a ``ValueError`` saying what is wrong."""
    if isinstance(requirements, str) or isinstance(pip_args, str):
        raise ValueError(
            "requirements and pip_args are lists of strings, one requirement or argument "
            'each: requirements=["pandas==2.2.3"], pip_args=["--index-url", "https://..."].'
        )
    wanted = list(requirements or [])
    arguments = list(pip_args or [])
    if not all(isinstance(r, str) and r.strip() for r in wanted):
        raise ValueError(f"Each requirement must be a non-empty string, got {wanted!r}.")
    if not all(isinstance(a, str) for a in arguments):
        raise ValueError(f"Each pip argument must be a string, got {arguments!r}.")
    if not wanted and (arguments or setup_spec is not None or snapshot_max_age is not None):
        raise ValueError(
            "pip_args, setup_spec and snapshot_max_age describe how requirements are "
            "installed; give requirements too, or drop them."
        )
    if setup_spec is not None and setup_spec.owner is not None:
        raise ValueError("setup_spec provisions the set-up's sandbox only; drop its owner.")
    return wanted, arguments
