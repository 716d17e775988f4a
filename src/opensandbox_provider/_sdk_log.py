"""
How much of the OpenSandbox SDK's own logging reaches the task log: warnings and errors only,
since its INFO lines repeat the provider's or contradict them (docs/operator.rst, "What the
task log shows"), unless a level was chosen for them. Airflow applies ``[logging]
namespace_levels`` to its structlog loggers only, and the SDK's are the standard library's, so
the option's entries for them are applied here.
"""

from __future__ import annotations

import logging
import re

# The SDK's loggers are named after its modules, all under this one.
SDK_LOGGER = "opensandbox"
# Airflow's own separators between ``namespace_levels`` entries.
_ENTRY_SEPARATORS = re.compile(r"[\s,]+")


def quiet_sdk_loggers() -> None:
    """Set the SDK's loggers to WARNING, unless a level was chosen for them (see the module)."""
    from airflow.providers.common.compat.sdk import conf

    # Airflow before 3.2 has no such option, which reads as none given.
    value = conf.get("logging", "namespace_levels", fallback=None)
    chosen: set[str] = set()
    for entry in _ENTRY_SEPARATORS.split(value or ""):
        name, _, level = entry.partition("=")
        name, level = name.strip(), level.strip().upper()
        if (name == SDK_LOGGER or name.startswith(f"{SDK_LOGGER}.")) and isinstance(
            logging.getLevelName(level), int
        ):
            logging.getLogger(name).setLevel(level)
            chosen.add(name)
    sdk = logging.getLogger(SDK_LOGGER)
    if SDK_LOGGER not in chosen and sdk.level == logging.NOTSET:
        sdk.setLevel(logging.WARNING)
