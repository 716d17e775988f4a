"""The Airflow internals the provider calls where Airflow offers no public API, each checked on
the installed Airflow line (the compatibility matrix runs this file on every one): a move or a
renamed parameter fails here, not in a task, a trigger or the UI.

The view's ``get_user`` is checked beside the view (plugins/test_sandboxes.py), and the shim
Airflow 3.0's decorated operators read, ``xcom_push``, by what it does
(decorators/test_opensandbox.py).
"""

from __future__ import annotations

import importlib
import inspect
from contextlib import AbstractContextManager

import pytest
from airflow.providers.common.compat.sdk import BaseOperator

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

# Newest first: the Task SDK's (3.x), then Airflow 2's.
_MAPPED_OPERATOR_MODULES = (
    "airflow.sdk.definitions.mappedoperator",
    "airflow.models.mappedoperator",
)


def _mapped_operator() -> type:
    for name in _MAPPED_OPERATOR_MODULES:
        try:
            return importlib.import_module(name).MappedOperator
        except ImportError:
            continue
    raise ImportError(f"None of {', '.join(_MAPPED_OPERATOR_MODULES)} is importable.")


def test_the_rendering_the_operator_overrides_has_the_signature_it_overrides() -> None:
    expected = ["self", "parent", "template_fields", "context", "jinja_env", "seen_oids"]
    assert list(inspect.signature(BaseOperator._do_render_template_fields).parameters) == expected
    assert (
        list(inspect.signature(OpenSandboxOperator._do_render_template_fields).parameters)
        == expected
    )


def test_a_mapped_task_is_still_rendered_through_the_method_the_operator_overrides() -> None:
    # Why the override exists: a mapped task never goes through render_template_fields of
    # the task it unmaps. Should Airflow render it some other way, the operator's own
    # rendering (script files, paths, private_env) would be skipped for mapped tasks.
    source = inspect.getsource(_mapped_operator().render_template_fields)
    assert "._do_render_template_fields(" in source


def test_the_triggers_task_state_lookup_takes_the_arguments_the_trigger_passes() -> None:
    task_runner = pytest.importorskip(
        "airflow.sdk.execution_time.task_runner", reason="Airflow 2 has no Task SDK"
    )
    lookup = inspect.getattr_static(task_runner.RuntimeTaskInstance, "get_task_states")
    # Called on the class, from a trigger that holds no running task instance.
    assert isinstance(lookup, staticmethod)
    inspect.signature(lookup.__func__).bind(dag_id="d", task_ids=["t"], run_ids=["r"], map_index=-1)
    # The same call as the public one a running task's instance offers.
    from airflow.sdk.types import RuntimeTaskInstanceProtocol

    public = inspect.getattr_static(RuntimeTaskInstanceProtocol, "get_task_states")
    assert isinstance(public, staticmethod)
    inspect.signature(public.__func__).bind(dag_id="d", task_ids=["t"], run_ids=["r"], map_index=-1)


def test_the_views_connection_listing_finds_airflows_session_and_connection_model() -> None:
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    assert "conn_type" in Connection.__table__.columns
    assert "conn_id" in Connection.__table__.columns
    assert isinstance(create_session(), AbstractContextManager)


def test_the_task_runner_tells_a_tries_end_through_the_listener_manager_parking_registers_with():
    # A durable agent's sandbox is parked or destroyed when its try ends, told by a listener
    # the backend adds to the manager the task runner's module calls ``get_listener_manager``.
    task_runner = pytest.importorskip(
        "airflow.sdk.execution_time.task_runner", reason="Airflow 2 has no Task SDK"
    )
    source = inspect.getsource(task_runner.finalize)
    for hook in ("on_task_instance_success", "on_task_instance_failed"):
        assert f"get_listener_manager().hook.{hook}(" in source
