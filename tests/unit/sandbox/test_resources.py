"""A task's own resources: limits beside cpu and memory, and requests below them, checked for
form when the Dag is parsed and sent to the server as its resourceLimits and resourceRequests."""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import datetime
from typing import Any

import pytest
from opensandbox.config.connection_sync import ConnectionConfigSync

from opensandbox_provider._connection_config import ConnectionConfig, creation_options
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.pool import WarmPool
from opensandbox_provider.pool._definition import CreationArguments
from opensandbox_provider.sandbox import OpenSandboxBackend, _creation
from opensandbox_provider.sandbox._resources import capped, quantity
from tests.unit.create_arguments import sent_by_create


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("500m", "0.5"),
        ("2", "2"),
        ("512Mi", str(512 * 2**20)),
        ("1.5Gi", str(3 * 2**29)),
        ("1e3", "1000"),
        ("250k", "250000"),
        (".5", "0.5"),
    ],
)
def test_a_kubernetes_quantity_is_read_as_kubernetes_reads_it(text: str, amount: str) -> None:
    assert quantity(text, "cpu") == type(quantity("1", "x"))(amount)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"cpu": "2 cores"}, "cpu must be a Kubernetes quantity"),
        ({"memory": "2g"}, "memory must be a Kubernetes quantity"),
        ({"memory": "-1Gi"}, "memory must be a Kubernetes quantity"),
        ({"cpu_request": "lots"}, "cpu_request must be a Kubernetes quantity"),
        ({"cpu": "1", "cpu_request": "1500m"}, "above the cpu limit '1'"),
        ({"memory": "1Gi", "memory_request": "2Gi"}, "above the memory limit '1Gi'"),
        ({"resources": {"nvidia.com/gpu": "one"}}, "The limit of 'nvidia.com/gpu'"),
        ({"resources": {"nvidia.com/gpu": "0.5"}}, "counted in whole units"),
        ({"resources": {"Nvidia.com/gpu": "1"}}, "is not a resource name"),
        ({"resources": {"/gpu": "1"}}, "is not a resource name"),
        ({"resources": {"a/b/c": "1"}}, "is not a resource name"),
        ({"resources": {"gpu!": "1"}}, "is not a resource name"),
        ({"resources": {"memory": "4Gi"}}, "give memory='4Gi' instead"),
        ({"resources": ["gpu"]}, "must map a resource's name"),
    ],
)
def test_a_resource_of_the_wrong_form_is_refused_when_the_dag_is_parsed(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        OpenSandboxBackend(**arguments)
    with pytest.raises(ValueError, match=message):
        OpenSandboxOperator(task_id="t", command="true", **arguments)
    with pytest.raises(ValueError, match=message):
        WarmPool(name="p", size=1, store="redis://localhost:6379/0", **arguments)


def test_extended_resources_and_requests_of_the_right_form_are_kept() -> None:
    backend = OpenSandboxBackend(
        cpu="2",
        memory="4Gi",
        cpu_request="500m",
        memory_request="4Gi",
        resources={"nvidia.com/gpu": "1", "gpu": "all", "ephemeral-storage": "10Gi"},
    )

    assert backend.resource_requests == {"cpu": "500m", "memory": "4Gi"}
    assert backend.resources == {"nvidia.com/gpu": "1", "gpu": "all", "ephemeral-storage": "10Gi"}
    # Airflow deep-copies a task's backend before it runs it.
    copied = copy.deepcopy(backend)
    assert (copied.resources, copied.resource_requests) == (
        backend.resources,
        backend.resource_requests,
    )


def test_a_templated_limit_defers_its_requests_check_to_the_run() -> None:
    # Compared with the default limit of 1 this request would be refused; the rendered limit
    # is not known yet.
    operator = OpenSandboxOperator(
        task_id="t", command="true", cpu="{{ params.cpu }}", cpu_request="2"
    )

    operator.cpu = "4"
    assert operator.new_backend().resource_requests == {"cpu": "2"}


def test_a_tasks_requests_override_the_connections_key_by_key() -> None:
    config = ConnectionConfig(domain="h:1", resource_requests={"cpu": "250m", "memory": "256Mi"})

    assert creation_options(config, {"memory": "1Gi"}) == {
        "resource_requests": {"cpu": "250m", "memory": "1Gi"}
    }
    assert creation_options(ConnectionConfigSync(domain="h:1"), {"cpu": "1"}) == {
        "resource_requests": {"cpu": "1"}
    }


def test_the_create_request_carries_the_extended_limits_and_the_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = sent_by_create(
        monkeypatch,
        OpenSandboxBackend(
            cpu="2", memory="1Gi", cpu_request="100m", resources={"nvidia.com/gpu": "1"}
        ),
    )

    assert sent["resource"] == {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert sent["resource_requests"] == {"cpu": "100m"}


def test_a_pool_serves_only_a_backend_of_the_same_resources() -> None:
    pool = WarmPool(name="gpus", size=1, store="redis://h:1/0", resources={"nvidia.com/gpu": "1"})
    same = OpenSandboxBackend(resources={"nvidia.com/gpu": "1"})
    other = OpenSandboxBackend(resources={"nvidia.com/gpu": "2"}, cpu_request="1")

    assert CreationArguments.of_template(same.creation_template(pool.spec)) == pool.creation
    differences = pool.creation.differences(
        CreationArguments.of_template(other.creation_template(pool.spec))
    )
    assert [said.split(" ")[0] for said in differences] == ["resources", "requests"]


def test_a_pool_without_the_new_arguments_keeps_the_fingerprint_it_had() -> None:
    pool = WarmPool(name="plain", size=1, store="redis://h:1/0")
    canonical = pool.creation.canonical()
    for added in ("resources", "requests", "registry_conn_id"):
        assert not canonical.pop(added)
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    assert pool.creation.fingerprint() == hashlib.sha256(text.encode()).hexdigest()[:32]


def test_the_decorator_takes_them_for_its_function_and_its_set_up_alike(monkeypatch) -> None:
    from airflow.providers.common.compat.sdk import dag, task

    from opensandbox_provider.decorators import opensandbox as decorator

    set_up: list[OpenSandboxBackend] = []

    def prepare_snapshot(backend: OpenSandboxBackend, *args: object, **kwargs: object) -> str:
        set_up.append(backend)
        raise RuntimeError("stop after the set-up")

    monkeypatch.setattr(decorator, "prepare_snapshot", prepare_snapshot)
    arguments = {
        "image": "r.io/trainer:3",
        "registry_conn_id": "team_registry",
        "cpu": "2",
        "cpu_request": "500m",
        "resources": {"nvidia.com/gpu": "1"},
    }

    @task.opensandbox(requirements=["numpy"], **arguments)
    def train() -> None:
        return None

    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        train()

    operator = holder().task_dict["train"]
    for backend in (operator.new_backend(), *_set_up_of(operator, set_up)):
        assert backend.registry_conn_id == "team_registry"
        assert backend.resources == {"nvidia.com/gpu": "1"}
        assert backend.resource_requests == {"cpu": "500m"}


def _set_up_of(operator: Any, set_up: list[OpenSandboxBackend]) -> list[OpenSandboxBackend]:
    with pytest.raises(RuntimeError, match="stop after the set-up"):
        operator.execute({})
    return set_up


def test_a_connections_request_above_a_tasks_limit_is_lowered_to_the_limit():
    # The connection's 128Mi default would make a pod Kubernetes refuses for a 64Mi sandbox.
    asked = {"cpu": "100m", "memory": "128Mi"}
    assert capped(asked, {"cpu": "1", "memory": "64Mi"}) == {"cpu": "100m", "memory": "64Mi"}
    assert capped(asked, {"cpu": "50m", "memory": "1Gi"}) == {"cpu": "50m", "memory": "128Mi"}
    assert capped(asked, {}) == asked


def test_a_create_may_wait_its_readiness_for_the_servers_answer():
    from datetime import timedelta

    config = ConnectionConfig(domain="h:1", request_timeout=timedelta(seconds=30))
    waiting = _creation.awaiting_the_pod(config, 120.0)
    assert waiting.request_timeout == timedelta(seconds=120)
    assert config.request_timeout == timedelta(seconds=30)
    assert waiting.domain == config.domain
    # A connection that already waits longer keeps its own.
    assert _creation.awaiting_the_pod(config, 10.0) is config
