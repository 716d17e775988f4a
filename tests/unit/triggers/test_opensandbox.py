"""OpenSandboxCommandTrigger's wait, against execd answers scripted in time, and its round trip."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from airflow.providers.common.compat.sdk import redact
from opensandbox.models.sandboxes import SandboxEndpoint

from opensandbox_provider.execd._background import BackgroundCommand
from opensandbox_provider.operators._command_end import CommandEnd, CommandEvent
from opensandbox_provider.sandbox._async_lifecycle import AsyncLifecycle
from opensandbox_provider.triggers import opensandbox as triggers
from opensandbox_provider.triggers.opensandbox import OpenSandboxCommandTrigger
from tests.unit.airflow_versions import forget_masked_values, task_masker
from tests.unit.as_sent import as_sent
from tests.unit.loopback_http import answering_every_get
from tests.unit.tls import make_authority

PATHS = {"stdout": "/tmp/.o.stdout", "stderr": "/tmp/.o.stderr"}
# A failure injected in place of execd's answer: a response made afresh for each request, or
# an exception the transport raises.
Answer = Exception | Callable[[httpx.Request], httpx.Response]


class Execd:
    """
    A background command as execd answers for it: one poll's worth of output per status poll,
    then its end; each stream in a file read by byte range (docs/execd-wire.rst, wire-range),
    and the combined log an earlier release read (wire-logs).

    ``failures`` answers the next requests instead, one each.
    """

    def __init__(
        self,
        prints: list[dict[str, bytes]] | None = None,
        exit_code: int = 0,
        error: str = "",
        *,
        started_at: str | None = None,
        finished_at: str | None = None,
    ) -> None:
        self.prints = list(prints or [])
        self.exit_code = exit_code
        self.error = error
        self.started_at = started_at
        self.finished_at = finished_at
        self.files = {path: bytearray() for path in PATHS.values()}
        self.combined = bytearray()
        self.failures: list[Answer] = []
        self.record_missing = False
        self.polls = 0
        self.served = 0
        self.requests: list[str] = []

    def print(self, stdout: bytes = b"", stderr: bytes = b"") -> None:
        self.files[PATHS["stdout"]] += stdout
        self.files[PATHS["stderr"]] += stderr
        self.combined += stdout + stderr

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request.url.path)
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, Exception):
                raise failure
            return failure(request)
        if request.url.path == "/files/download":
            return self._download(request)
        if request.url.path.endswith("/logs"):
            cursor = int(request.url.params["cursor"])
            headers = {"EXECD-COMMANDS-TAIL-CURSOR": str(len(self.combined))}
            return httpx.Response(
                200, stream=httpx.ByteStream(bytes(self.combined[cursor:])), headers=headers
            )
        self.polls += 1
        if self.record_missing:
            return httpx.Response(404, json={"code": "INVALID_REQUEST_BODY"})
        if self.prints:
            self.print(**self.prints.pop(0))
            return httpx.Response(200, json={"id": "c", "running": True})
        body: dict[str, Any] = {"id": "c", "running": False, "exit_code": self.exit_code}
        if self.error:
            body["error"] = self.error
        if self.started_at and self.finished_at:
            body |= {"started_at": self.started_at, "finished_at": self.finished_at}
        return httpx.Response(200, json=body)

    def _download(self, request: httpx.Request) -> httpx.Response:
        data = self.files.get(request.url.params["path"])
        if data is None:
            return httpx.Response(404, stream=httpx.ByteStream(b'{"code": "FILE_NOT_FOUND"}'))
        first, last = map(
            int, re.fullmatch(r"bytes=(\d+)-(\d+)", request.headers["Range"]).groups()
        )
        if not data:
            return httpx.Response(200, stream=httpx.ByteStream(b""))
        if first >= len(data):
            return httpx.Response(
                416,
                stream=httpx.ByteStream(b"invalid range: failed to overlap"),
                headers={"Content-Range": f"bytes */{len(data)}"},
            )
        last = min(last, len(data) - 1)
        self.served += last + 1 - first
        return httpx.Response(
            206,
            stream=httpx.ByteStream(bytes(data[first : last + 1])),
            headers={"Content-Range": f"bytes {first}-{last}/{len(data)}"},
        )


class Server:
    """
    The async lifecycle calls the trigger makes. ``renewals`` answers the next renewals in
    turn, ``True`` (renewed), ``False`` (the sandbox is gone) or an exception; then ``exists``.
    """

    def __init__(self, *, exists: bool = True, renewals: list[bool | Exception] | None = None):
        self.exists = exists
        self.renewals_left = list(renewals or [])
        self.calls: list[str] = []
        self.destroyed: list[str] = []

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def renew(self, sandbox: str, *, default_lease: float) -> bool:
        self.calls.append("renew")
        if self.renewals_left:
            answer = self.renewals_left.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return self.exists

    @property
    def renewals(self) -> int:
        return self.calls.count("renew")

    async def aclose(self) -> None:
        self.calls.append("closed")

    async def kill(self, sandbox: str) -> None:
        self.destroyed.append(sandbox)


def trigger(**overrides: Any) -> OpenSandboxCommandTrigger:
    arguments = {
        "sandbox": "sbx",
        "command_id": "c",
        "opensandbox_conn_id": "opensandbox_default",
        "command_timeout": 60.0,
        "sandbox_timeout": 60.0,
        "output_paths": PATHS,
        "poll_interval": 0.001,
        **overrides,
    }
    return OpenSandboxCommandTrigger(**arguments)


def connector(
    execd: Execd, server: Server, failures: list[Exception] | None = None
) -> Callable[[], Any]:
    """How the trigger reaches execd in these tests: through the scripted answers, after the
    ``failures`` it meets first."""
    left = list(failures or [])

    async def connect() -> BackgroundCommand:
        server.calls.append("connect")
        if left:
            raise left.pop(0)
        client = httpx.AsyncClient(transport=as_sent(execd))
        return BackgroundCommand(client, "http://execd", "c", 5.0)

    return connect


def wait(
    made: OpenSandboxCommandTrigger,
    execd: Execd,
    server: Server,
    *,
    connect_failures: list[Exception] | None = None,
) -> dict:
    async def go() -> dict:
        event = await made._wait(server, connector(execd, server, connect_failures))  # type: ignore[arg-type]
        return event.payload

    return asyncio.run(go())


def run(made: OpenSandboxCommandTrigger, execd: Execd, server: Server) -> dict:
    """The trigger as the triggerer runs it, its lifecycle client and execd scripted."""
    made._lifecycle = lambda: server  # type: ignore[method-assign, assignment, return-value]
    made._connect = lambda lifecycle, clients: connector(execd, server)()  # type: ignore[method-assign]

    async def first_event() -> dict:
        events = [event.payload async for event in made.run()]
        assert len(events) == 1
        return events[0]

    return asyncio.run(first_event())


@pytest.fixture(autouse=True)
def plain_logger(monkeypatch):
    monkeypatch.setattr(OpenSandboxCommandTrigger, "log", logging.getLogger("trigger"))
    # Far longer than any test's scripted failures last, far shorter than production's: a
    # wait that fails where it should not ends in seconds.
    monkeypatch.setattr(OpenSandboxCommandTrigger, "unreachable_grace", 5.0)


@pytest.fixture
def short_graces(monkeypatch):
    """Graces of a few polls, so that giving up is reached without sleeping production's."""
    monkeypatch.setattr(OpenSandboxCommandTrigger, "unreachable_grace", 0.05)
    monkeypatch.setattr(OpenSandboxCommandTrigger, "missing_record_grace", 0.05)


def logged(caplog) -> list[str]:
    # The trigger's own records: where Airflow leaves the root logger at INFO (2.11), httpx's
    # request lines reach the same handler.
    return [r.getMessage() for r in caplog.records if r.name == "trigger"]


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def test_each_line_is_logged_at_the_poll_it_appears_and_the_end_carries_each_streams_tail(
    caplog,
) -> None:
    caplog.set_level(logging.INFO, logger="trigger")
    execd = Execd(
        [{"stdout": b"one\n"}, {"stdout": b"two\nthr", "stderr": b"warn\n"}, {"stdout": b"ee\n"}]
    )
    made = trigger()
    event = wait(made, execd, Server())
    assert event == {
        "status": "ended",
        "sandbox": "sbx",
        "exit_code": 0,
        "stdout": "one\ntwo\nthree\n",
        "stderr": "warn\n",
        "timed_out": False,
    }
    # What the trigger fires is the one type's event, which the operator reads back.
    assert (
        event == CommandEvent("sbx", CommandEnd(0, "one\ntwo\nthree\n", "warn\n", False)).payload()
    )
    lines = [m for m in logged(caplog) if not m.startswith("Command")]
    assert lines == [
        "[sandbox stdout] one",
        "[sandbox stdout] two",
        "[sandbox stderr] warn",
        "[sandbox stdout] three",
    ]
    assert made.cursors == {"stdout": len(b"one\ntwo\nthree\n"), "stderr": len(b"warn\n")}


def test_the_tails_end_their_lines_as_a_foreground_commands_output_does() -> None:
    # A foreground command's output comes as line events, ended at CR LF, CR or LF, each line
    # given back a line feed (docs/execd-wire.rst, wire-lines).
    execd = Execd([{"stdout": b"a\r\nb\rc\n\nd", "stderr": b"e\r\n"}])
    event = wait(trigger(), execd, Server())
    assert (event["stdout"], event["stderr"]) == ("a\nb\nc\n\nd\n", "e\n")


def test_a_failed_command_ends_with_its_code_and_only_what_it_printed(caplog) -> None:
    caplog.set_level(logging.INFO, logger="trigger")
    execd = Execd([{"stdout": b"out\n", "stderr": b"bad\n"}], 3, "exit status 3")
    event = wait(trigger(), execd, Server())
    assert (event["exit_code"], event["stdout"], event["stderr"]) == (3, "out\n", "bad\n")
    assert "Command c in sandbox sbx ended: exit status 3." in logged(caplog)


def test_a_command_killed_at_its_deadline_ended_timed_out() -> None:
    killed = {"exit_code": -1, "error": "signal: killed"}
    execd = Execd(
        [],
        **killed,
        started_at="2026-12-01T10:00:00+00:00",
        finished_at="2026-12-01T10:00:02+00:00",
    )
    assert wait(trigger(command_timeout=2.0), execd, Server())["timed_out"] is True
    # Killed by a signal well before its deadline (more than execd's clock's second): not a
    # timeout.
    execd = Execd(
        [],
        **killed,
        started_at="2026-12-01T10:00:00+00:00",
        finished_at="2026-12-01T10:00:00.500000+00:00",
    )
    assert wait(trigger(command_timeout=2.0), execd, Server())["timed_out"] is False


def test_output_past_the_logged_bound_is_skipped_to_its_tail_not_read(caplog) -> None:
    caplog.set_level(logging.INFO, logger="trigger")
    line = b"x" * 16383 + b"\n"
    # 17 MiB of 16 KiB lines fill the task log's 16 MiB; the 8 MiB after them are not read.
    execd = Execd([{"stdout": line * 1088 + b"y" * (8 << 20) + b"\nlast\n"}])
    event = wait(trigger(max_output_bytes=1024), execd, Server())
    assert event["stdout"].endswith("y\nlast\n") and len(event["stdout"]) == 1024
    assert execd.served < 17 * 1024 * 1024 + 4 * 1024 * 1024
    assert any("is not logged" in m for m in logged(caplog))


def test_a_read_that_brings_nothing_ends_the_polls_reading_whatever_end_execd_claims() -> None:
    execd = Execd([{}, {}, {}], exit_code=0)

    def empty_of_a_gigabyte(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            206, stream=httpx.ByteStream(b""), headers={"Content-Range": "bytes 0-0/1073741824"}
        )

    execd._download = empty_of_a_gigabyte  # type: ignore[method-assign]
    event = wait(trigger(), execd, Server())
    assert event["status"] == "ended"
    # One look at each stream's size, then one read of each per poll: never a second read of
    # nothing within a poll, which would spin for as long as the claim stands.
    assert execd.requests.count("/files/download") == 2 * (1 + execd.polls)


def test_a_resumed_trigger_reads_no_more_history_than_the_tail_bound(caplog) -> None:
    caplog.set_level(logging.INFO, logger="trigger")
    execd = Execd([{"stdout": b"after\n"}])
    # What the command printed while no triggerer watched it: 64 MiB, and 3 bytes of stderr.
    execd.print(stdout=b"z" * (64 << 20) + b"\nend of history\n", stderr=b"e!\n")
    made = trigger(max_output_bytes=100, cursors={"stdout": 0, "stderr": 0})
    event = wait(made, execd, Server())
    # The one-byte look at each stream's size, the last 100 bytes of history, what came after.
    assert execd.served <= 1 + 100 + 1 + 3 + len(b"after\n")
    assert event["stdout"].endswith("z\nend of history\nafter\n") and len(event["stdout"]) == 100
    assert event["stderr"] == "e!\n"
    notes = [m for m in logged(caplog) if "are not logged here" in m]
    assert notes == [
        f"[{(64 << 20) + 16 - 100} bytes of stdout printed before this triggerer took the "
        "command up are not logged here; the last 100 bytes follow]"
    ]


def test_a_trigger_deferred_by_an_earlier_release_reads_the_combined_log_from_its_cursor() -> None:
    execd = Execd([{"stdout": b"two\n"}])
    execd.print(stdout=b"one\n")
    old = {
        key: value
        for key, value in trigger().serialize()[1].items()
        if key not in ("output_paths", "deadline_at", "task_deadline_at", "cursors")
    }
    made = OpenSandboxCommandTrigger(**old, cursor=4)
    execd.exit_code, execd.error = 3, "exit status 3"
    event = wait(made, execd, Server())
    assert (event["stdout"], event["stderr"]) == ("two\n", "two\nexit status 3\n")
    assert made.cursors == {"output": 8}
    assert made.deadline_at == pytest.approx(time.time() + 60.0 + 30.0, abs=5)


# ---------------------------------------------------------------------------
# Renewals
# ---------------------------------------------------------------------------


def test_the_sandbox_is_renewed_as_soon_as_the_trigger_starts() -> None:
    server = Server()
    wait(trigger(sandbox_timeout=3600.0), Execd([{"stdout": b"x\n"}]), server)
    # A lease of an hour is not due for renewal in the test's time, but the first poll renews.
    assert server.calls[:2] == ["renew", "connect"]
    assert server.renewals == 1


def test_the_sandbox_is_renewed_while_the_command_runs() -> None:
    server = Server()
    # A lease of 0.03 s is renewed every 0.01 s; a hundred polls take longer than that.
    wait(trigger(sandbox_timeout=0.03), Execd([{"stdout": b"x\n"}] * 100), server)
    assert server.renewals > 2


def test_the_sandbox_is_renewed_right_before_the_event_and_handed_over() -> None:
    server = Server()
    event = run(trigger(sandbox_timeout=3600.0), Execd([{"stdout": b"x\n"}]), server)
    assert event["status"] == "ended"
    assert server.calls == ["renew", "connect", "renew", "closed"]


def test_a_sandbox_gone_from_the_server_ends_the_wait_as_an_error_at_once() -> None:
    server = Server(renewals=[True, False])
    event = wait(trigger(sandbox_timeout=0.003), Execd([{"stdout": b"x\n"}] * 100), server)
    assert event["status"] == "error" and "ended while the command ran" in event["message"]
    assert server.renewals == 2


def test_a_renewal_that_raises_is_retried_and_the_wait_goes_on() -> None:
    server = Server(renewals=[ConnectionError("server restarting")] * 3)
    event = wait(trigger(), Execd([{"stdout": b"x\n"}]), server)
    assert (event["status"], event["stdout"]) == ("ended", "x\n")
    assert server.renewals == 4


def test_renewals_that_raise_past_the_grace_end_the_wait_with_an_error_event(short_graces) -> None:
    server = Server(renewals=[ConnectionError("server gone away")] * 10_000)
    event = wait(trigger(), Execd([{"stdout": b"x\n"}]), server)
    assert event["status"] == "error"
    assert "could not be polled for 0.05s" in event["message"]
    assert "server gone away" in event["message"]


# ---------------------------------------------------------------------------
# Failures and deadlines
# ---------------------------------------------------------------------------


def answering(status: int, **body: Any) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, **body)


@pytest.mark.parametrize(
    "failure",
    [
        answering(500, text="runtime error"),
        answering(200, text="<html>a proxy's page</html>"),
        answering(200, json={"id": "c", "running": "maybe"}),
        answering(200, json=["not", "a", "status"]),
        httpx.ReadTimeout("execd is slow"),
        RuntimeError("anything else"),
    ],
    ids=["http-500", "not-json", "malformed-status", "not-an-object", "timeout", "any-error"],
)
def test_an_answer_that_cannot_be_used_is_retried_until_the_command_ends(failure) -> None:
    execd = Execd([{"stdout": b"one\n"}, {"stdout": b"two\n"}], exit_code=0)
    execd.failures = [failure] * 5
    event = wait(trigger(), execd, Server())
    assert (event["status"], event["stdout"]) == ("ended", "one\ntwo\n")


def test_a_log_read_that_fails_is_retried_without_losing_output() -> None:
    execd = Execd([{"stdout": b"one\n"}, {"stdout": b"two\n"}], exit_code=0)

    def refuse_downloads(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/files/download":
            return httpx.Response(500, text="disk error")
        return execd.__class__.__call__(execd, request)

    # The status answers, then its output read fails, twice.
    execd.failures = [lambda r: execd.__class__.__call__(execd, r), refuse_downloads] * 2
    event = wait(trigger(), execd, Server())
    assert (event["status"], event["stdout"]) == ("ended", "one\ntwo\n")


def test_polls_that_fail_past_the_grace_end_the_wait_with_an_error_event(short_graces) -> None:
    execd = Execd([{"stdout": b"x\n"}])
    execd.failures = [answering(502, text="bad gateway")] * 100_000
    event = wait(trigger(), execd, Server())
    assert event["status"] == "error"
    assert "could not be polled for 0.05s" in event["message"] and "HTTP 502" in event["message"]


def test_execd_unreachable_at_the_start_is_waited_for() -> None:
    server = Server()
    refused = [httpx.ConnectError("connection refused")] * 3
    event = wait(trigger(), Execd([{"stdout": b"x\n"}]), server, connect_failures=refused)
    assert (event["status"], event["stdout"]) == ("ended", "x\n")
    assert server.calls.count("connect") == 4


def test_execd_is_reached_once_however_often_the_first_reads_fail() -> None:
    server = Server()
    execd = Execd([{"stdout": b"x\n"}])
    # The first look at each stream's size fails, three times.
    execd.failures = [answering(500, text="disk error")] * 3
    event = wait(trigger(), execd, server)
    assert (event["status"], event["stdout"]) == ("ended", "x\n")
    assert server.calls.count("connect") == 1


def test_execd_unreachable_past_the_grace_ends_the_wait_with_an_error_event(short_graces) -> None:
    refused = [httpx.ConnectError("connection refused")] * 100_000
    server = Server()
    event = wait(trigger(), Execd(), server, connect_failures=refused)
    assert event == {
        "status": "error",
        "sandbox": "sbx",
        "message": (
            "Sandbox sbx could not be polled for 0.05s; the last failure: connection refused"
        ),
    }
    # The sandbox was renewed, then execd reached for, and only the reach failed.
    assert server.calls[:2] == ["renew", "connect"]
    assert set(server.calls) == {"renew", "connect"}


def test_a_record_missing_past_its_grace_on_a_live_sandbox_is_an_error(short_graces) -> None:
    execd = Execd([{"stdout": b"x\n"}] * 100_000)
    execd.record_missing = True
    event = wait(trigger(), execd, Server())
    assert event["status"] == "error" and "has no record of command c" in event["message"]


def test_a_record_missing_because_the_sandbox_is_gone_says_so(short_graces) -> None:
    execd = Execd()
    execd.record_missing = True
    event = wait(trigger(), execd, Server(renewals=[True, False]))
    assert event["status"] == "error" and "ended while the command ran" in event["message"]


def test_a_record_missing_for_an_instant_is_not_an_error() -> None:
    execd = Execd([{"stdout": b"x\n"}])
    execd.failures = [answering(404, json={"code": "INVALID_REQUEST_BODY"})] * 3
    assert wait(trigger(), execd, Server())["status"] == "ended"


def test_a_command_running_past_its_deadline_and_the_backstop_is_given_up() -> None:
    execd = Execd([{"stdout": b"x\n"}] * 100_000)
    event = wait(trigger(deadline_at=time.time() + 0.05), execd, Server())
    assert event["status"] == "error"
    assert "still running 30s past its 60s deadline" in event["message"]


def test_the_task_deadline_ends_the_wait_with_a_timeout_event() -> None:
    execd = Execd([{"stdout": b"x\n"}] * 100_000)
    event = wait(trigger(task_deadline_at=time.time() + 0.05), execd, Server())
    assert event["status"] == "timeout" and "execution_timeout" in event["message"]


def test_deadlines_are_kept_even_while_nothing_answers() -> None:
    execd = Execd()
    execd.failures = [httpx.ConnectError("down")] * 100_000
    event = wait(trigger(task_deadline_at=time.time() + 0.05), execd, Server())
    assert event["status"] == "timeout"


class NeverAnswered(httpx.AsyncBaseTransport):
    """An execd that takes every request and answers none: each poll lasts its whole budget."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def never_answering() -> Callable[[], Any]:
    async def connect() -> BackgroundCommand:
        client = httpx.AsyncClient(transport=NeverAnswered())
        return BackgroundCommand(client, "http://execd", "c", 60.0)

    return connect


def test_a_poll_that_never_ends_is_cut_at_the_next_renewal_so_the_lease_keeps_its_pace(
    monkeypatch,
) -> None:
    # A lease renewed every 0.3 s, and a floor below it, so the renewal is what cuts each poll.
    monkeypatch.setattr(triggers, "MIN_POLL_BUDGET", 0.1)
    made = trigger(sandbox_timeout=0.9, task_deadline_at=time.time() + 1.5)
    server = Server()
    started = time.monotonic()
    event = asyncio.run(made._wait(server, never_answering()))  # type: ignore[arg-type]
    took = time.monotonic() - started
    assert event.payload["status"] == "timeout"
    # Renewed at once and every 0.3 s after, however long execd keeps each poll.
    assert server.renewals >= 4, server.calls
    assert took < 1.5 + 0.3 + 1.0


def test_a_poll_due_at_or_past_a_deadline_is_still_given_the_least_budget() -> None:
    made = trigger(deadline_at=time.time() - 10, task_deadline_at=time.time() - 10)
    watch = triggers._Watch(streams=[], output=None, last_answer=0.0)  # type: ignore[arg-type]
    assert made._poll_budget(watch) == triggers.MIN_POLL_BUDGET
    watch.renew_at = time.monotonic() - 5
    assert made._poll_budget(watch) == triggers.MIN_POLL_BUDGET


def test_a_polls_budget_is_the_time_to_the_nearest_of_renewal_and_deadlines() -> None:
    made = trigger(
        sandbox_timeout=120.0, deadline_at=time.time() + 50, task_deadline_at=time.time() + 30
    )
    watch = triggers._Watch(streams=[], output=None, last_answer=0.0)  # type: ignore[arg-type]
    watch.renew_at = time.monotonic() + 100
    assert 29 < made._poll_budget(watch) <= 30
    watch.renew_at = time.monotonic() + 10
    assert 9 < made._poll_budget(watch) <= 10
    # The first poll renews as it starts: it ends by the renewal after, 40 s on.
    watch.renew_at = None
    made.task_deadline_at = None
    assert made._poll_budget(watch) == 40


# ---------------------------------------------------------------------------
# Secrets
# ---------------------------------------------------------------------------

SECRET = "s3cret-token-of-the-task"


def test_a_private_value_the_command_prints_is_masked_in_the_event_and_known_to_the_masker(
    caplog,
) -> None:
    # A value another test registered stays with the process's masker, and Airflow 2.11 masks
    # even a one-letter value, which would mask part of "token=" too.
    forget_masked_values(task_masker())
    caplog.set_level(logging.INFO, logger="trigger")
    execd = Execd([{"stdout": f"token={SECRET}\n".encode(), "stderr": f"{SECRET}\n".encode()}], 3)
    event = run(trigger(secrets=[SECRET]), execd, Server())
    assert SECRET not in json.dumps(event)
    assert (event["stdout"], event["stderr"], event["exit_code"]) == ("token=***\n", "***\n", 3)
    # The lines the trigger logged go through the masker Airflow's log handlers apply, which
    # now knows the value.
    assert all(SECRET not in redact(line) for line in logged(caplog))
    assert any("token=" in line for line in logged(caplog))


def test_a_trigger_deferred_without_secrets_still_runs_and_masks_nothing_of_its_own() -> None:
    execd = Execd([{"stdout": b"plain output\n"}])
    made = trigger()
    assert made.serialize()[1]["secrets"] == []
    assert run(made, execd, Server())["stdout"] == "plain output\n"


# ---------------------------------------------------------------------------
# Serialization
# ---------------------------------------------------------------------------


def test_the_trigger_is_rebuilt_from_what_it_serializes_deadlines_included() -> None:
    made = trigger(cursors={"stdout": 42, "stderr": 7}, task_deadline_at=1234.5)
    path, kwargs = made.serialize()
    assert path == "opensandbox_provider.triggers.opensandbox.OpenSandboxCommandTrigger"
    time.sleep(0.01)
    rebuilt = OpenSandboxCommandTrigger(**kwargs)
    assert rebuilt.serialize() == (path, kwargs)
    assert kwargs["cursors"] == {"stdout": 42, "stderr": 7} and kwargs["output_paths"] == PATHS
    # The backstop is a time on the wall clock, so a restart does not start it again.
    assert kwargs["deadline_at"] == made.deadline_at == rebuilt.deadline_at
    assert kwargs["task_deadline_at"] == 1234.5


def test_the_secrets_survive_serialization_for_a_restarted_triggerer() -> None:
    path, kwargs = trigger(secrets=[SECRET]).serialize()
    assert OpenSandboxCommandTrigger(**kwargs).secrets == [SECRET]


# ---------------------------------------------------------------------------
# TLS
# ---------------------------------------------------------------------------


class TlsServer(AsyncLifecycle):
    """The connection's lifecycle client, its TLS trust the connection's, for a sandbox whose
    execd the server says answers at ``endpoint``."""

    def __init__(self, endpoint: str) -> None:
        super().__init__("opensandbox_default")
        self.endpoint = endpoint

    async def renew(self, sandbox: str, *, default_lease: float) -> bool:
        return True

    async def _resolve(self, sandbox: str, config: Any) -> SandboxEndpoint:
        return SandboxEndpoint(endpoint=self.endpoint)


@pytest.fixture
def private_execd(tmp_path, monkeypatch) -> Callable[..., dict]:
    """Run a trigger against an execd on loopback whose certificate a private CA signed,
    through a connection that names that CA in ca_bundle, or not."""
    authority = make_authority(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(authority.server_cert_pem, authority.server_key_pem)
    ended = json.dumps({"id": "c", "running": False, "exit_code": 0}).encode()

    def run_through(*, trusting: bool) -> dict:
        extra = {"ca_bundle": str(authority.ca_pem)} if trusting else {}
        with answering_every_get(200, "application/json", ended, tls=context) as port:
            monkeypatch.setenv(
                "AIRFLOW_CONN_OPENSANDBOX_DEFAULT",
                json.dumps(
                    {
                        "conn_type": "opensandbox",
                        "host": f"127.0.0.1:{port}",
                        "schema": "https",
                        "extra": extra,
                    }
                ),
            )
            made = trigger()
            made._lifecycle = lambda: TlsServer(f"127.0.0.1:{port}")  # type: ignore[method-assign]

            async def first_event() -> dict:
                async for event in made.run():
                    return event.payload
                raise AssertionError("The trigger ended without an event.")

            return asyncio.run(first_event())

    return run_through


def test_execd_behind_a_private_authority_is_trusted_through_the_ca_bundle(private_execd) -> None:
    event = private_execd(trusting=True)
    assert (event["status"], event["exit_code"]) == ("ended", 0)


def test_without_the_ca_bundle_execd_behind_a_private_authority_is_refused(
    private_execd, monkeypatch
) -> None:
    monkeypatch.setattr(OpenSandboxCommandTrigger, "unreachable_grace", 0.2)
    event = private_execd(trusting=False)
    assert event["status"] == "error" and "CERTIFICATE_VERIFY_FAILED" in event["message"]
