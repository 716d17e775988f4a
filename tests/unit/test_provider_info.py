"""The provider info Airflow reads through the entry point, checked the way Airflow checks it."""

from __future__ import annotations

import importlib
import json
import tomllib
from importlib import resources
from importlib.metadata import distribution
from pathlib import Path

import pytest
from airflow.providers_manager import ProvidersManager, _create_provider_info_schema_validator
from packaging.utils import canonicalize_name

from opensandbox_provider.get_provider_info import get_provider_info
from tests.unit.airflow_versions import DEFAULT_SENSITIVE_FIELDS, registered_hooks

DISTRIBUTION = "airflow-provider-opensandbox"
REPO = Path(__file__).resolve().parents[2]


def connection_type() -> dict:
    (connection,) = get_provider_info()["connection-types"]
    return connection


def test_the_provider_info_passes_airflows_own_schema() -> None:
    _create_provider_info_schema_validator().validate(get_provider_info())


def test_the_package_name_is_the_canonical_distribution_name() -> None:
    # Airflow refuses a mismatch, and the refusal breaks discovery of every provider.
    assert get_provider_info()["package-name"] == canonicalize_name(distribution(DISTRIBUTION).name)


def test_the_entry_point_is_the_one_airflow_calls() -> None:
    (entry_point,) = [
        point
        for point in distribution(DISTRIBUTION).entry_points
        if point.group == "apache_airflow_provider"
    ]
    assert entry_point.load() is get_provider_info


def test_the_connection_type_names_a_hook_that_agrees_with_it() -> None:
    connection = connection_type()
    module, _, name = connection["hook-class-name"].rpartition(".")
    hook = getattr(importlib.import_module(module), name)
    assert connection["connection-type"] == hook.conn_type == "opensandbox"
    assert hook.conn_name_attr == "opensandbox_conn_id"
    assert hook.default_conn_name == "opensandbox_default"
    # Connection.get_hook() passes the connection id under conn_name_attr.
    assert hook(**{hook.conn_name_attr: "x"}).opensandbox_conn_id == "x"


def test_no_field_the_form_would_mask_has_a_default() -> None:
    # The form shows the default of a field with a sensitive name as "***", and a save
    # then stores that string into the connection.
    for name, field in connection_type()["conn-fields"].items():
        if any(word in name.lower() for word in DEFAULT_SENSITIVE_FIELDS):
            assert "default" not in field["schema"], name


def test_the_form_relabels_the_password_as_the_api_key_and_hides_the_login() -> None:
    behaviour = connection_type()["ui-field-behaviour"]
    assert behaviour["hidden-fields"] == ["login"]
    assert behaviour["relabeling"]["password"] == "API key"
    assert set(connection_type()["conn-fields"]) == {
        "request_timeout",
        "use_server_proxy",
        "ca_bundle",
        "cpu_request",
        "memory_request",
    }


def test_the_form_takes_the_ca_bundle_as_a_path() -> None:
    field = connection_type()["conn-fields"]["ca_bundle"]
    assert field["schema"] == {"type": ["string", "null"]}
    assert "PEM" in field["description"]


def test_airflow_discovers_the_provider_and_its_hook() -> None:
    assert DISTRIBUTION in ProvidersManager().providers
    hook = registered_hooks()["opensandbox"]
    assert hook is not None
    assert hook.hook_class_name == connection_type()["hook-class-name"]


def test_every_module_and_class_the_provider_info_names_imports() -> None:
    info = get_provider_info()
    for section in ("hooks", "operators", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    (decorator,) = info["task-decorators"]
    module, _, name = decorator["class-name"].rpartition(".")
    assert callable(getattr(importlib.import_module(module), name))
    assert decorator["name"] == "opensandbox"


def test_airflow_offers_the_decorator_as_task_opensandbox() -> None:
    # Through common.compat: airflow.sdk on Airflow 3, airflow.decorators on 2.11.
    from airflow.providers.common.compat.sdk import task

    from opensandbox_provider.decorators.opensandbox import opensandbox_task

    assert task.opensandbox is opensandbox_task


@pytest.mark.airflow_at_least(
    "3.0",
    reason="2.11 ships only its runtime schema, without the hooks, integrations, operators "
    "and plugins keys every provider's info has",
)
def test_the_provider_info_holds_only_what_airflow_reads() -> None:
    # Airflow's schema names every key it reads; a version or dependency ranges kept here
    # would be a second copy of the distribution's metadata for nobody, and drift from it.
    schema = json.loads(
        resources.files("airflow").joinpath("provider_info.schema.json").read_text("utf-8")
    )
    unnamed = set(get_provider_info()) - set(schema["properties"])
    # `cli` is read from Airflow 3.2 on; the runtime schema of a line before it lets a key it
    # does not name pass, so there the key is inert.
    assert unnamed <= {"cli"}
    if unnamed:
        assert schema.get("additionalProperties", True) is not False


def test_airflow_reports_the_distributions_version_for_the_provider() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert ProvidersManager().providers[DISTRIBUTION].version == project["version"]


def test_the_providers_manager_lists_the_sandboxes_view_among_the_providers_plugins() -> None:
    (plugin,) = [p for p in ProvidersManager().plugins if p.provider_name == DISTRIBUTION]
    assert plugin.name == "opensandbox"
    assert importlib.import_module(plugin.plugin_class.rsplit(".", 1)[0]).OpenSandboxPlugin

    from opensandbox_provider.plugins.sandboxes import OpenSandboxPlugin

    assert plugin.plugin_class == f"{OpenSandboxPlugin.__module__}.{OpenSandboxPlugin.__name__}"


def test_the_sandboxes_view_setting_is_declared_on_by_default() -> None:
    option = get_provider_info()["config"]["opensandbox"]["options"]["sandboxes_view"]
    assert option["type"] == "boolean"
    assert option["default"] == "True"


def test_airflows_cli_asks_the_provider_not_the_executor_for_commands() -> None:
    # Without a `cli` entry, Airflow 3.2+ imports the executor at every `airflow` command and
    # prints a warning on stdout, which turns `airflow providers list -o json` into non-JSON.
    manager = ProvidersManager()
    if not hasattr(manager, "cli_command_providers"):
        pytest.skip("this Airflow line reads no `cli` entry from providers")
    assert DISTRIBUTION in manager.cli_command_providers
    (declared,) = get_provider_info()["cli"]
    module, _, name = declared.rpartition(".")
    assert getattr(importlib.import_module(module), name)() == []
