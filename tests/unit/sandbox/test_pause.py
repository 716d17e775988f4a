"""Pausing a released sandbox and resuming it on the next reach, against a stand-in server."""

from __future__ import annotations

import copy
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from airflow.providers.common.ai.sandbox.base import (
    HOLDER_TAG,
    OWNER_TAG,
    SandboxError,
    SandboxTerminalError,
)
from opensandbox.exceptions import SandboxApiException

from opensandbox_provider import _tags
from opensandbox_provider.sandbox import OpenSandboxBackend, _pause
from opensandbox_provider.sandbox._record import SandboxRecord

OWNER = "dag/run"
HOLDER = "dag/run/agent"


class WrongState(SandboxApiException):
    """What the SDK raises when the server answers 409."""

    def __init__(self) -> None:
        super().__init__("Pause sandbox failed: HTTP 409", status_code=409)


class Server:
    """One sandbox's lifecycle, as the server keeps it: its state, tags and expiry."""

    def __init__(self, *, holder: str | None = HOLDER) -> None:
        tags = {OWNER_TAG: OWNER} if holder is None else {OWNER_TAG: OWNER, HOLDER_TAG: holder}
        self.metadata = _tags.encode(tags)
        self.state = "Running"
        self.expires_at = datetime.now(UTC) + timedelta(seconds=600)
        self.calls: list[str] = []
        # As the Kubernetes runtime: a state the sandbox is on its way to, reached after this
        # many more reads of its info.
        self.on_the_way: tuple[str, int] | None = None
        self.then: tuple[str, int] | None = None

    def get_sandbox_info(self, sandbox: str) -> SimpleNamespace:
        if self.on_the_way is not None:
            arrives_at, reads_left = self.on_the_way
            self.on_the_way = (arrives_at, reads_left - 1) if reads_left > 1 else None
            if reads_left <= 1:
                self.state = arrives_at
                self.on_the_way, self.then = self.then, None
        return SimpleNamespace(
            id=sandbox,
            metadata=dict(self.metadata),
            expires_at=self.expires_at,
            status=SimpleNamespace(state=self.state),
        )

    def patch_sandbox_metadata(self, sandbox: str, changes: dict) -> None:
        for key, value in changes.items():
            if value is None:
                self.metadata.pop(key, None)
            else:
                self.metadata[key] = value

    def renew_sandbox(self, sandbox: str, timeout: timedelta) -> None:
        self.calls.append("renew")
        self.expires_at = datetime.now(UTC) + timeout

    def pause_sandbox(self, sandbox: str) -> None:
        self.calls.append("pause")
        if self.state != "Running":
            raise WrongState
        self.state = "Paused"

    def resume_sandbox(self, sandbox: str) -> None:
        self.calls.append("resume")
        if self.state != "Paused":
            raise WrongState
        self.state = "Running"

    def close(self) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    from opensandbox.sync.manager import SandboxManagerSync

    stand_in = Server()
    monkeypatch.setattr(SandboxManagerSync, "create", staticmethod(lambda config: stand_in))
    monkeypatch.setattr(OpenSandboxBackend, "_connection_config", lambda self: object())
    return stand_in


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch, server: Server) -> list[str]:
    """Each connection a backend opens, in the stand-in server's order of calls."""
    from opensandbox import SandboxSync

    def connect(handle: str, **_: object) -> SimpleNamespace:
        # A connection to a frozen sandbox would resolve endpoints that may not last.
        server.calls.append(f"connect while {server.state}")
        return SimpleNamespace(id=handle, close=lambda: None)

    monkeypatch.setattr(SandboxSync, "connect", staticmethod(connect))
    # The services a record opens on a sandbox need real endpoints; none is used here.
    monkeypatch.setattr(SandboxRecord, "__post_init__", lambda self: None)
    resumed: list[str] = []
    monkeypatch.setattr(
        OpenSandboxBackend,
        "_check_resumed",
        lambda self, record, took: resumed.append(record.sdk.id),
    )
    return resumed


def test_pausing_what_is_already_paused_says_so_instead_of_failing(server) -> None:
    backend = OpenSandboxBackend()
    server.state = "Paused"

    assert not _pause.pause(backend._lifecycle, "sb-1")


def test_resuming_what_another_task_resumed_first_is_no_failure(server) -> None:
    backend = OpenSandboxBackend()

    assert _pause.resume(backend._lifecycle, "sb-1", within=1) >= 0
    assert server.calls == ["resume"]


def test_a_release_pauses_the_sandbox_after_its_closing_renewal(server) -> None:
    backend = OpenSandboxBackend(pause_when_released=True)

    backend.release("sb-1", holder=HOLDER)

    assert server.state == "Paused"
    assert HOLDER_TAG not in _tags.decode(server.metadata)


def test_a_release_leaves_the_sandbox_running_by_default(server) -> None:
    OpenSandboxBackend().release("sb-1", holder=HOLDER)

    assert server.state == "Running"
    assert "pause" not in server.calls


def test_a_release_by_a_task_that_does_not_hold_it_leaves_the_holders_sandbox_running(
    server,
) -> None:
    OpenSandboxBackend(pause_when_released=True).release("sb-1", holder="someone/else")

    assert server.state == "Running"
    assert _tags.decode(server.metadata)[HOLDER_TAG] == HOLDER


def test_a_paused_sandbox_keeps_the_expiry_of_its_last_renewal(server) -> None:
    backend = OpenSandboxBackend(pause_when_released=True)
    backend._leases.hold("sb-1", lease=600)
    renewed_to = server.expires_at

    backend.release("sb-1", holder=HOLDER)

    # The closing renewal, then the pause: no renewal runs while it is paused.
    assert server.calls[-2:] == ["renew", "pause"]
    assert server.expires_at >= renewed_to
    assert backend._leases.held() == frozenset()


def test_reaching_for_a_paused_sandbox_resumes_it_before_connecting(server, connects) -> None:
    server.state = "Paused"
    backend = OpenSandboxBackend()

    record = backend._sandbox("sb-1")

    assert server.calls == ["resume", "connect while Running"]
    assert connects == ["sb-1"]
    assert record.sdk.id == "sb-1"


def test_a_sandbox_still_pausing_is_waited_for_then_resumed_and_reached_once_it_runs(
    server, connects
) -> None:
    server.state = "Pausing"
    server.on_the_way = ("Paused", 3)
    backend = OpenSandboxBackend()

    original_resume = server.resume_sandbox

    def resume_slowly(sandbox: str) -> None:
        # Accepted, but still reported paused at first, as the Kubernetes runtime does.
        original_resume(sandbox)
        server.state, server.on_the_way = "Paused", ("Resuming", 2)
        server.then = ("Running", 2)

    server.resume_sandbox = resume_slowly  # type: ignore[method-assign]

    backend._sandbox("sb-1")

    assert server.calls == ["resume", "connect while Running"]
    assert connects == ["sb-1"]


def test_a_sandbox_pausing_past_ready_timeout_is_an_error_that_names_it(server, connects) -> None:
    server.state = "Pausing"
    backend = OpenSandboxBackend(ready_timeout=0.6)

    with pytest.raises(SandboxError, match=r"Sandbox sb-1 was still pausing 0.6s later"):
        backend._sandbox("sb-1")
    assert server.calls == []


def test_a_sandbox_that_fails_on_its_way_back_from_a_pause_is_an_error(server, connects) -> None:
    server.state = "Paused"
    backend = OpenSandboxBackend()

    def resume_into_failure(sandbox: str) -> None:
        server.calls.append("resume")
        server.state, server.on_the_way = "Resuming", ("Failed", 2)

    server.resume_sandbox = resume_into_failure  # type: ignore[method-assign]

    with pytest.raises(SandboxError, match="did not come back from its pause: it is Failed"):
        backend._sandbox("sb-1")
    assert server.calls == ["resume"]


def test_reaching_for_a_running_sandbox_resumes_nothing(server, connects) -> None:
    OpenSandboxBackend()._sandbox("sb-1")

    assert server.calls == ["connect while Running"]
    assert connects == []


def test_the_pause_setting_survives_airflows_deep_copy_of_a_task() -> None:
    assert copy.deepcopy(OpenSandboxBackend(pause_when_released=True)).pause_when_released


class SilentExecd:
    """
    An execd that never answers its health check: how long it was waited for is kept. It has
    nothing else, so a command sent to it fails the test.
    """

    def __init__(self) -> None:
        self.waited_for: list[float] = []

    def wait_until_answering(self, deadline: float) -> float | None:
        self.waited_for.append(deadline - time.monotonic())
        return None


@pytest.fixture
def silent_after_resume(monkeypatch: pytest.MonkeyPatch, server: Server) -> SimpleNamespace:
    """A paused sandbox whose execd stays silent once resumed; what the backend did about it."""
    from opensandbox import SandboxSync

    seen = SimpleNamespace(execd=SilentExecd(), closed=[])
    server.state = "Paused"

    def connect(handle: str, **_: object) -> SimpleNamespace:
        server.calls.append(f"connect while {server.state}")
        return SimpleNamespace(id=handle, close=lambda: seen.closed.append(handle))

    def services(record: SandboxRecord) -> None:
        record.execd = seen.execd  # type: ignore[assignment]

    monkeypatch.setattr(SandboxSync, "connect", staticmethod(connect))
    monkeypatch.setattr(SandboxRecord, "__post_init__", services)
    return seen


def test_execd_silent_after_a_resume_fails_the_command_before_it_is_sent(
    server, silent_after_resume
) -> None:
    backend = OpenSandboxBackend(ready_timeout=5)

    with pytest.raises(SandboxError) as raised:
        backend.run_command("sb-1", "echo hi", timeout=10, max_output_bytes=100)

    assert not isinstance(raised.value, SandboxTerminalError)
    assert str(raised.value) == (
        "Sandbox sb-1 was resumed, but execd did not answer within 5s. Retry the task, or "
        "raise ready_timeout."
    )
    assert server.calls == ["resume", "connect while Running"]
    # Waited for for ready_timeout, from the resume; then let go, not kept.
    [allowed] = silent_after_resume.execd.waited_for
    assert 4.0 < allowed <= 5.0
    assert silent_after_resume.closed == ["sb-1"]
    assert backend._sandboxes == {}
