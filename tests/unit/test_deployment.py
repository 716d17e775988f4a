"""The deployment id: the option when set, checked as a metadata value, and stamped on creates."""

from __future__ import annotations

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec

from opensandbox_provider import _deployment, _tags
from opensandbox_provider._deployment import DeploymentUnknownError, deployment_id

VARIABLE = "AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID"


def test_the_option_names_the_deployment(monkeypatch) -> None:
    monkeypatch.setenv(VARIABLE, " production ")
    assert deployment_id() == "production"
    monkeypatch.setenv(VARIABLE, "staging.eu-1")
    assert deployment_id() == "staging.eu-1"


@pytest.mark.parametrize("value", ["-starts-with-a-dash", "has space", "x" * 64, "ünï"])
def test_an_option_that_cannot_be_stamped_is_refused_with_what_to_use(monkeypatch, value) -> None:
    monkeypatch.setenv(VARIABLE, value)
    with pytest.raises(DeploymentUnknownError, match="use 1 to 63 letters, digits"):
        deployment_id()


def test_without_the_option_a_process_that_cannot_reach_a_database_says_how_to_name_it(
    monkeypatch,
) -> None:
    monkeypatch.setenv(VARIABLE, "")
    _deployment._stored.cache_clear()

    def unreachable() -> None:
        raise OSError("no metadata database here")

    monkeypatch.setattr(_deployment, "_read", unreachable)
    try:
        with pytest.raises(DeploymentUnknownError) as raised:
            deployment_id()
    finally:
        _deployment._stored.cache_clear()
    message = str(raised.value)
    assert "no metadata database here" in message
    assert "AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID" in message


def test_without_the_option_the_id_is_made_once_and_read_back_after(monkeypatch) -> None:
    monkeypatch.setenv(VARIABLE, "")
    _deployment._stored.cache_clear()
    stored: dict[str, str] = {}
    monkeypatch.setattr(_deployment, "_read", lambda: stored.get("id"))
    monkeypatch.setattr(
        _deployment, "_create", lambda candidate: stored.setdefault("id", candidate)
    )
    try:
        first = deployment_id()
        _deployment._stored.cache_clear()
        assert deployment_id() == first and len(first) == 32
    finally:
        _deployment._stored.cache_clear()


def test_every_sandbox_a_backend_creates_carries_the_deployment() -> None:
    metadata = _tags.creation_metadata(
        SandboxSpec(), workdir=None, lease=60.0, identity={}, deployment="production"
    )
    assert metadata[_deployment.KEY] == "production"
