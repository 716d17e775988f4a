"""
The metrics sent through Airflow's ``Stats``: each emission point sends its name, the names
are the documented ones, and a metrics backend that fails never fails the caller.

Here ``Stats`` is a recorder put where the provider looks it up; the real path through
Airflow's StatsD client to a UDP listener is proven in a real Airflow (tests/airflow_path,
test_operator_features.py).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from airflow.providers.common.compat import sdk as compat_sdk
from airflow.providers.common.compat.sdk import AirflowTaskTimeout
from opensandbox.pool import InMemoryPoolStateStore

from opensandbox_provider import _metrics
from opensandbox_provider.egress._policy import network_policy, require_enforced
from opensandbox_provider.execd._events import EventParser
from opensandbox_provider.execd._stream_end import Abandoned, StreamedCommand
from opensandbox_provider.maintenance._cleanup import kill_leaked_sandboxes
from opensandbox_provider.operators._tries import kill_other_tries
from opensandbox_provider.pool import ServerPool, WarmPool
from opensandbox_provider.sandbox import OpenSandboxBackend
from opensandbox_provider.sandbox._creation import route
from tests.sent_metrics import Recorder, recording
from tests.unit.egress.test_policy import sidecar_answer
from tests.unit.killed_through_hooks import killed_through_hooks
from tests.unit.maintenance.test_cleanup import FakeHook as CleanupHook
from tests.unit.maintenance.test_cleanup import summary as leaked
from tests.unit.operators.test_tries import FakeHook as TriesHook
from tests.unit.operators.test_tries import summary as left_by
from tests.unit.pool.test_definition import draw
from tests.unit.sandbox_server import Scripted, sandbox_services

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.rst"


@pytest.fixture
def stats(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return recording(monkeypatch)


def test_every_metric_is_under_the_providers_prefix_and_documented() -> None:
    documented = DOCS.read_text()
    for name in _metrics.NAMES:
        assert name.startswith("opensandbox."), name
        assert f"``{name}``" in documented, f"{name} is not in docs/metrics.rst"


def test_a_creation_is_timed_under_its_routes_name_and_tag(stats: Recorder) -> None:
    _metrics.sandbox_created("warm_pool", 1.5)
    assert stats.sent == [
        (
            "timing",
            "opensandbox.sandbox.create.warm_pool",
            timedelta(seconds=1.5),
            {"route": "warm_pool"},
        )
    ]


def test_the_route_is_the_pool_a_sandbox_was_drawn_from() -> None:
    assert route(None) == "cold"
    assert route(WarmPool("py", 1, InMemoryPoolStateStore())) == "warm_pool"
    assert route(ServerPool("pods")) == "server_pool"


def test_a_backend_that_fails_costs_the_metric_not_the_caller(monkeypatch) -> None:
    class Broken:
        def incr(self, *args: Any, **kwargs: Any) -> None:
            raise ValueError("an allow list Airflow cannot parse")

    monkeypatch.setattr(compat_sdk, "Stats", Broken(), raising=False)
    _metrics.count(_metrics.WARM_POOL_HIT)


def test_the_task_timeout_passes_through_a_metric(monkeypatch) -> None:
    class TimedOut:
        def incr(self, *args: Any, **kwargs: Any) -> None:
            raise AirflowTaskTimeout("the task's execution_timeout ran out")

    monkeypatch.setattr(compat_sdk, "Stats", TimedOut(), raising=False)
    with pytest.raises(AirflowTaskTimeout):
        _metrics.count(_metrics.WARM_POOL_HIT)


def test_nothing_is_counted_when_nothing_happened(stats: Recorder) -> None:
    _metrics.count(_metrics.KILLED_BY_CLEANUP, 0)
    assert stats.sent == []


def test_the_sandboxes_a_retry_kills_are_counted(stats: Recorder, monkeypatch) -> None:
    killed_through_hooks(monkeypatch)
    TriesHook.listed = [
        left_by("sb-new", try_number=3),
        left_by("sb-1", try_number=1),
        left_by("sb-2", try_number=2),
        left_by("sb-ended", try_number=1, state="Terminated"),
    ]
    identity = TriesHook.listed[0].identity
    assert identity is not None
    killed = kill_other_tries(TriesHook([]), identity, keep="sb-new")  # type: ignore[arg-type]
    assert [sandbox.id for sandbox in killed] == ["sb-1", "sb-2"]
    assert stats.sent == [("incr", "opensandbox.sandbox.killed.retry", 2, {})]


def test_the_sandboxes_the_cleanup_kills_are_counted(stats: Recorder, monkeypatch) -> None:
    killed_through_hooks(monkeypatch)
    hook = CleanupHook([leaked("sb-done", "done"), leaked("sb-running", "running")])
    states = {"done": "success", "running": "running"}
    kill_leaked_sandboxes(hook, lambda identity: states[identity.run_id])  # type: ignore[arg-type]
    assert stats.sent == [("incr", "opensandbox.sandbox.killed.cleanup", 1, {})]


def test_a_warm_pool_draw_that_gets_nothing_is_a_miss_of_that_pool(stats: Recorder) -> None:
    assert draw(WarmPool("py", 1, InMemoryPoolStateStore())) is None
    with pytest.raises(SandboxTerminalError):
        draw(WarmPool("strict", 1, InMemoryPoolStateStore(), when_empty="fail"))
    assert stats.sent == [
        ("incr", "opensandbox.warm_pool.miss", 1, {"pool": "py"}),
        ("incr", "opensandbox.warm_pool.miss", 1, {"pool": "strict"}),
    ]


def test_a_policy_the_sidecar_does_not_prove_is_counted_as_it_is_refused(stats: Recorder) -> None:
    policy = network_policy(SandboxSpec())
    answer = sidecar_answer(default="allow")
    with sandbox_services(Scripted({"/proxy/18080/policy": [(200, answer)]})) as http:
        with pytest.raises(SandboxTerminalError, match="did not enforce"):
            require_enforced(http, policy, sandbox="sb-1")
    assert stats.names() == ["opensandbox.egress.policy_unenforced"]


def test_a_proven_policy_counts_nothing(stats: Recorder) -> None:
    policy = network_policy(SandboxSpec())
    with sandbox_services(Scripted({"/proxy/18080/policy": [(200, sidecar_answer())]})) as http:
        require_enforced(http, policy, sandbox="sb-1")
    assert stats.sent == []


class Stalling(OpenSandboxBackend):
    """A backend whose one sandbox's command stream is abandoned as stalled."""

    def __init__(self) -> None:
        super().__init__(None)
        self.destroyed: list[str] = []

    def _command_slot(self, sandbox: str, timeout: float):  # type: ignore[no-untyped-def]
        class Execd:
            def run(self, command: str, **_: Any) -> StreamedCommand:
                return StreamedCommand(EventParser(1024), Abandoned("it sent nothing for 60s"))

        record = SimpleNamespace(sdk=SimpleNamespace(id=sandbox), execd=Execd(), workdir=None)
        return record, int(timeout * 1000)

    def _destroy_quietly(self, sandbox: str, *, after: str) -> None:
        self.destroyed.append(sandbox)


def test_an_abandoned_stream_is_counted_as_its_sandbox_is_destroyed(stats: Recorder) -> None:
    backend = Stalling()
    result = backend.run_command("sb-1", "sleep 600", timeout=900, max_output_bytes=1024)
    assert result.sandbox_terminated and backend.destroyed == ["sb-1"]
    assert stats.sent == [("incr", "opensandbox.command.abandoned", 1, {})]
