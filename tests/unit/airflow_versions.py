"""What the unit tests read from Airflow itself, wherever the installed Airflow keeps it.

The compatibility matrix (``make compat``) runs these tests on every supported Airflow line,
and Airflow moved its log masker and its hook registry between them.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

# Newest first: 3.1 and later, 3.0, 2.x.
_MASKER_MODULES = (
    "airflow.sdk._shared.secrets_masker",
    "airflow.sdk.execution_time.secrets_masker",
    "airflow.utils.log.secrets_masker",
)


def _first_module(names: tuple[str, ...]) -> ModuleType:
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"None of {', '.join(names)} is importable in this Airflow.")


_masker_module = _first_module(_MASKER_MODULES)
SecretsMasker = _masker_module.SecretsMasker
DEFAULT_SENSITIVE_FIELDS: frozenset[str] = frozenset(_masker_module.DEFAULT_SENSITIVE_FIELDS)


def task_masker() -> Any:
    """The masker a task's log lines go through."""
    return _masker_module._secrets_masker()


def hides_values_of(masker: Any, key: str) -> bool:
    # Airflow 2 answers this with a module function, 3 with a method of the masker.
    if hasattr(masker, "should_hide_value_for_key"):
        return bool(masker.should_hide_value_for_key(key))
    return bool(_masker_module.should_hide_value_for_key(key))


def forget_masked_values(masker: Any) -> None:
    if hasattr(masker, "reset_masker"):
        masker.reset_masker()
    else:
        masker.patterns, masker.replacer = set(), None


def registered_hooks() -> Any:
    """The hooks by connection type, as a task's runtime looks them up."""
    try:
        from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
    except ImportError:  # before 3.2 the runtime used the one ProvidersManager
        from airflow.providers_manager import ProvidersManager

        return ProvidersManager().hooks
    return ProvidersManagerTaskRuntime().hooks
