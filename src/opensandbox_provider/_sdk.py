"""The OpenSandbox SDK is an optional dependency; this is where its absence is reported."""

from __future__ import annotations

import importlib.metadata

INSTALL_COMMAND = 'pip install "airflow-provider-opensandbox[opensandbox]"'


class OpenSandboxNotInstalled(ImportError):
    """The ``opensandbox`` SDK is missing from the environment."""


def require_sdk() -> None:
    """
    Import the SDK, or raise :class:`OpenSandboxNotInstalled` saying how to install it: called
    first, so the package imports, and Dags using it parse, where the extra is not installed.
    """
    try:
        import opensandbox  # noqa: F401
    except ImportError as e:
        raise OpenSandboxNotInstalled(
            f"The OpenSandbox SDK is not installed. Install it with: {INSTALL_COMMAND}"
        ) from e


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution``, or a word saying it could not be read."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"
