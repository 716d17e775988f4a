"""The SDK's own INFO lines stay out of the task log unless a level is chosen for them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from opensandbox_provider._sdk_log import SDK_LOGGER
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

# Loggers the SDK logs its lifecycle lines to at INFO.
SDK_MODULE_LOGGERS = ("opensandbox.sync.sandbox", "opensandbox.sync.manager")


@pytest.fixture(autouse=True)
def fresh_sdk_loggers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with the SDK's loggers as the SDK leaves them, and leaves them so."""
    names = (SDK_LOGGER, *SDK_MODULE_LOGGERS)
    saved = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.NOTSET)
    monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", "127.0.0.1:1")
    monkeypatch.delenv("AIRFLOW__LOGGING__NAMESPACE_LEVELS", raising=False)
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def configure_the_sdk() -> None:
    assert OpenSandboxHook(None).connection_config is not None


def test_configuring_the_sdk_keeps_its_info_lines_out_of_the_log(caplog) -> None:
    caplog.set_level(logging.INFO)
    configure_the_sdk()
    logging.getLogger("opensandbox.sync.sandbox").info("Killing sandbox: x")
    logging.getLogger("opensandbox.sync.manager").warning("Renewal failed for sandbox x")
    assert [record.getMessage() for record in caplog.records] == ["Renewal failed for sandbox x"]


def test_airflows_namespace_levels_bring_them_back(monkeypatch, caplog) -> None:
    monkeypatch.setenv("AIRFLOW__LOGGING__NAMESPACE_LEVELS", "sqlalchemy=WARNING, opensandbox=INFO")
    caplog.set_level(logging.INFO)
    configure_the_sdk()
    logging.getLogger("opensandbox.sync.sandbox").info("Killing sandbox: x")
    assert [record.getMessage() for record in caplog.records] == ["Killing sandbox: x"]


def test_a_namespace_level_for_one_sdk_module_leaves_the_rest_quiet(monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW__LOGGING__NAMESPACE_LEVELS", "opensandbox.sync.manager=DEBUG")
    configure_the_sdk()
    assert logging.getLogger("opensandbox.sync.manager").getEffectiveLevel() == logging.DEBUG
    assert logging.getLogger("opensandbox.sync.sandbox").getEffectiveLevel() == logging.WARNING


def test_a_level_set_by_a_logging_config_or_the_dag_is_kept() -> None:
    logging.getLogger(SDK_LOGGER).setLevel(logging.DEBUG)
    configure_the_sdk()
    assert logging.getLogger(SDK_LOGGER).level == logging.DEBUG
