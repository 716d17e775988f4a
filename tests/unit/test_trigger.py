"""OpenSandboxCommandTrigger's wait, against execd answers scripted in time, and its round trip."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from opensandbox_provider.sandbox._background import BackgroundCommand
from opensandbox_provider.triggers.opensandbox import OpenSandboxCommandTrigger


class ScriptedExecd:
    """A background command that prints one line per poll, then ends with ``exit_code``."""

    def __init__(self, lines: list[bytes], exit_code: int, error: str = "") -> None:
        self.lines = lines
        self.exit_code = exit_code
        self.error = error
        self.polls = 0
        self.printed = b""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/logs"):
            cursor = int(request.url.params["cursor"])
            headers = {"EXECD-COMMANDS-TAIL-CURSOR": str(len(self.printed))}
            return httpx.Response(
                200, stream=httpx.ByteStream(self.printed[cursor:]), headers=headers
            )
        self.polls += 1
        if self.lines:
            self.printed += self.lines.pop(0)
            return httpx.Response(200, json={"id": "c", "running": True})
        body = {"id": "c", "running": False, "exit_code": self.exit_code, "error": self.error}
        return httpx.Response(200, json=body)


class Server:
    """The lifecycle calls the trigger makes, on a sandbox that exists or does not."""

    def __init__(self, *, exists: bool = True) -> None:
        self.exists = exists
        self.renewals = 0

    def renew(self, sandbox: str) -> bool:
        self.renewals += 1
        return self.exists


def trigger(**overrides) -> OpenSandboxCommandTrigger:
    arguments = {
        "sandbox": "sbx",
        "command_id": "c",
        "opensandbox_conn_id": "opensandbox_default",
        "command_timeout": 60.0,
        "sandbox_timeout": 60.0,
        "poll_interval": 0.001,
        **overrides,
    }
    made = OpenSandboxCommandTrigger(**arguments)
    return made


def wait(made: OpenSandboxCommandTrigger, execd: ScriptedExecd, server: Server) -> dict:
    async def go() -> dict:
        async with httpx.AsyncClient(transport=httpx.MockTransport(execd)) as client:
            command = BackgroundCommand(client, "http://execd", "c")
            event = await made._wait(server, command)  # type: ignore[arg-type]
            return event.payload

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def plain_logger(monkeypatch):
    monkeypatch.setattr(OpenSandboxCommandTrigger, "log", logging.getLogger("trigger"))


def test_each_line_is_logged_at_the_poll_it_appears_and_the_end_carries_the_tail(caplog) -> None:
    caplog.set_level(logging.INFO, logger="trigger")
    execd = ScriptedExecd([b"one\n", b"two\nthr", b"ee\n"], exit_code=0)
    made = trigger()
    event = wait(made, execd, Server())
    assert event == {
        "status": "ended",
        "sandbox": "sbx",
        "exit_code": 0,
        "output": "one\ntwo\nthree\n",
        "timed_out": False,
    }
    # The trigger's own records: where Airflow leaves the root logger at INFO (2.11), httpx's
    # request lines reach the same handler.
    lines = [r.getMessage() for r in caplog.records if r.name == "trigger"]
    assert [m for m in lines if not m.startswith("Command")] == [
        "[sandbox output] one",
        "[sandbox output] two",
        "[sandbox output] three",
    ]
    assert made.cursor == len(b"one\ntwo\nthree\n")


def test_a_failed_command_ends_with_its_code_and_gos_error_after_the_output() -> None:
    event = wait(trigger(), ScriptedExecd([b"bad\n"], 3, "exit status 3"), Server())
    assert (event["exit_code"], event["output"]) == (3, "bad\nexit status 3\n")


def test_the_sandbox_is_renewed_while_the_command_runs() -> None:
    server = Server()
    # A lease of 0.03 s is renewed every 0.01 s; a hundred polls take longer than that.
    wait(trigger(sandbox_timeout=0.03), ScriptedExecd([b"x\n"] * 100, 0), server)
    assert server.renewals > 1


def test_a_sandbox_gone_from_the_server_ends_the_wait_as_an_error() -> None:
    event = wait(
        trigger(sandbox_timeout=0.003), ScriptedExecd([b"x\n"] * 100, 0), Server(exists=False)
    )
    assert event["status"] == "error" and "ended while the command ran" in event["message"]


def test_the_trigger_is_rebuilt_from_what_it_serializes() -> None:
    made = trigger(cursor=42)
    path, kwargs = made.serialize()
    assert path == "opensandbox_provider.triggers.opensandbox.OpenSandboxCommandTrigger"
    assert OpenSandboxCommandTrigger(**kwargs).serialize() == (path, kwargs)
    assert kwargs["cursor"] == 42 and kwargs["sandbox"] == "sbx" and kwargs["command_id"] == "c"
