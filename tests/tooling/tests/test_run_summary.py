"""What a run's summary says about the stack it ran on (tests/run_summary.py)."""

from __future__ import annotations

from dev.stack.state import ServerInfo, StackState
from tests import run_summary


def _state(**extra: str) -> StackState:
    servers = {
        name: ServerInfo(name, "127.0.0.1", port, "key", None, {"cpu_request": "100m", **extra})
        for name, port in (("plain", 18093), ("dns", 18094))
    }
    return StackState(servers, "python:3.12-slim", "10.213.0.1")


def test_a_kubernetes_run_names_the_route_its_connections_took(monkeypatch) -> None:
    monkeypatch.setenv("RUNTIME", "kubernetes")
    assert run_summary._route(_state(use_server_proxy="false")) == "ingress gateway"
    assert run_summary._route(_state()) == "server proxy"


def test_a_docker_run_names_no_route(monkeypatch) -> None:
    monkeypatch.delenv("RUNTIME", raising=False)
    assert run_summary._route(_state(use_server_proxy="false")) == ""
