"""The trigger's graceful stop, run through execd over its async client: the worker's stop
script, read by the worker's reading of its answer, and what the event then says."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from typing import Any

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.execd._run_to_end import run_to_end
from opensandbox_provider.operators._stop import StopCommand
from opensandbox_provider.sandbox._async_lifecycle import ExecdEndpoint
from opensandbox_provider.triggers.opensandbox import OpenSandboxCommandTrigger
from tests.unit.as_sent import as_sent
from tests.unit.triggers.test_opensandbox import Execd, Server, logged, trigger, wait

GROUP_FILE = "/tmp/.opensandbox-g.pgid"


def events(*frames: dict[str, Any]) -> bytes:
    """execd's event stream: compact JSON frames, each followed by a blank line."""
    return b"".join(json.dumps(frame, separators=(",", ":")).encode() + b"\n\n" for frame in frames)


class StoppableExecd(Execd):
    """A command that runs until the stop ends it; the stop's own run answers ``stop_answer``."""

    def __init__(self, stop_answer: httpx.Response) -> None:
        super().__init__([{"stdout": b"working\n"}] * 10_000)
        self.stop_answer = stop_answer
        self.stops: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/command":
            self.stops.append(json.loads(request.content))
            if self.stop_answer.status_code == 200:
                # The stop ended the command: its next status says so.
                self.prints, self.exit_code, self.error = [], -1, "signal: terminated"
            return self.stop_answer
        return super().__call__(request)


def stopping(execd: StoppableExecd, **overrides: Any) -> tuple[OpenSandboxCommandTrigger, dict]:
    made = trigger(
        group_file=GROUP_FILE,
        termination_grace_period=2.0,
        stop_at=time.time() - 1,
        **overrides,
    )

    async def execd_at(lifecycle: Any, clients: Any) -> tuple[httpx.AsyncClient, ExecdEndpoint]:
        endpoint = ExecdEndpoint("http://execd", {}, ssl.create_default_context(), 5.0)
        return httpx.AsyncClient(transport=as_sent(execd)), endpoint

    made._execd = execd_at  # type: ignore[method-assign]
    return made, wait(made, execd, Server())


@pytest.fixture(autouse=True)
def plain_logger(monkeypatch):
    monkeypatch.setattr(OpenSandboxCommandTrigger, "log", logging.getLogger("trigger"))


def test_a_command_past_its_stop_time_is_stopped_by_the_workers_script_and_its_event_says_how(
    caplog,
) -> None:
    caplog.set_level(logging.INFO, logger="trigger")
    answer = events(
        {"type": "init", "text": "s", "timestamp": 1},
        {"type": "stdout", "text": "terminated 3", "timestamp": 2},
        {"type": "execution_complete", "timestamp": 3},
    )
    execd = StoppableExecd(httpx.Response(200, stream=httpx.ByteStream(answer)))
    made, event = stopping(execd)
    stop = StopCommand(GROUP_FILE, 2.0)
    assert execd.stops == [{"command": stop.script, "timeout": round(stop.timeout * 1000)}]
    assert event["status"] == "ended" and event["stopped"] == "stopped by SIGTERM after 0.3s"
    assert "The command in sandbox sbx was stopped by SIGTERM after 0.3s." in logged(caplog)


def test_a_stop_execd_refuses_is_logged_and_the_wait_goes_on_to_the_commands_end(caplog) -> None:
    execd = StoppableExecd(httpx.Response(500, json={"code": "RUNTIME_ERROR", "message": "no"}))
    made, event = stopping(execd, deadline_at=time.time() + 0.5)
    assert len(execd.stops) >= 1 and "stopped" not in event
    assert any(
        m.startswith(
            "Could not stop command c gracefully: execd refused to run a command with HTTP 500"
        )
        for m in logged(caplog)
    )


async def _run(answer: bytes, sent: list[httpx.Request] | None = None) -> Any:
    def execd(request: httpx.Request) -> httpx.Response:
        if sent is not None:
            sent.append(request)
        return httpx.Response(200, stream=httpx.ByteStream(answer))

    client = httpx.AsyncClient(transport=as_sent(execd))
    async with client:
        return await run_to_end(
            client, "http://execd", "true", timeout=1.0, max_output_bytes=64, call_timeout=1.0
        )


@pytest.mark.parametrize(
    ("ending", "exit_code", "stderr"),
    [
        ({"type": "execution_complete", "timestamp": 3}, 0, ""),
        (
            {"type": "error", "error": {"evalue": "2", "traceback": ["exit status 2"]}},
            2,
            "exit status 2",
        ),
        (
            {"type": "error", "error": {"evalue": "-1", "traceback": ["signal: killed"]}},
            -1,
            "signal: killed",
        ),
    ],
)
def test_a_command_run_to_its_end_returns_its_exit_code_and_output(
    ending: dict, exit_code: int, stderr: str
) -> None:
    answer = events({"type": "stdout", "text": "out", "timestamp": 1}, ending)
    result = asyncio.run(_run(answer))
    assert (result.exit_code, result.stdout, result.stderr) == (exit_code, "out\n", stderr)


def test_the_command_asks_for_its_connection_to_be_closed_so_a_go_proxy_keeps_its_stream() -> None:
    # OpenSandbox's ingress gateway otherwise may close its connection to execd mid-stream
    # (see opensandbox_provider._exchange's _send).
    sent: list[httpx.Request] = []
    asyncio.run(_run(events({"type": "execution_complete", "timestamp": 3}), sent))
    assert [request.headers.get("Connection") for request in sent] == ["close"]


def test_a_stream_that_ends_without_saying_how_the_command_ended_is_an_error() -> None:
    with pytest.raises(SandboxError, match="without saying how the command ended"):
        asyncio.run(_run(events({"type": "stdout", "text": "out", "timestamp": 1})))
