"""OpenSandboxOperator against the real server: each outcome, files, live logs, kill, deferral."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowSkipException,
    ObjectStoragePath,
    TaskDeferred,
)

from dev.stack.state import ServerInfo
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.sandbox import OpenSandboxBackend
from opensandbox_provider.triggers.opensandbox import OpenSandboxCommandTrigger
from tests.network.sandboxes import Listener

CONN_ID = "opensandbox_default"
OPEN = SandboxSpec(block_network=False)
# How the task log marks a line the command printed on stdout.
STDOUT = "[sandbox stdout] "
# Airflow's loggers are structlog's, which only a task runner routes anywhere; here each
# operator and trigger logs to this standard logger instead, which the tests listen to.
TASK_LOG = logging.getLogger("tests.operator.task_log")


class Lines(logging.Handler):
    """Each message logged, with when it was logged."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.created, record.getMessage()))

    def first(self, text: str) -> float:
        return next(at for at, message in self.records if message == text)

    @property
    def messages(self) -> list[str]:
        return [message for _, message in self.records]


@pytest.fixture
def operator_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., OpenSandboxOperator]]:
    """Operators whose default connection names ``server``; their sandboxes never outlive a test."""
    made: list[OpenSandboxOperator] = []

    def make(server: ServerInfo, **arguments: Any) -> OpenSandboxOperator:
        for name, value in server.airflow_connection_env(CONN_ID).items():
            monkeypatch.setenv(name, value)
        arguments.setdefault("spec", OPEN)
        made.append(OpenSandboxOperator(task_id=f"task_{len(made)}", **arguments))
        return made[-1]

    yield make
    for operator in made:
        if operator._sandbox_id is not None:
            OpenSandboxBackend(CONN_ID).destroy(operator._sandbox_id)


@pytest.fixture(autouse=True)
def task_log(monkeypatch: pytest.MonkeyPatch) -> None:
    for logged in (OpenSandboxOperator, OpenSandboxCommandTrigger):
        monkeypatch.setattr(logged, "log", property(lambda self: TASK_LOG))


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    TASK_LOG.addHandler(handler)
    TASK_LOG.setLevel(logging.INFO)
    yield handler
    TASK_LOG.removeHandler(handler)


def destroyed(sandbox: str | None) -> bool:
    # A renewal answers False only once the server no longer has the sandbox.
    assert sandbox is not None
    return OpenSandboxBackend(CONN_ID).renew(sandbox) is False


def executing(operator: OpenSandboxOperator) -> tuple[threading.Thread, list[BaseException]]:
    """The operator's task running on a thread of its own, and what it ended with, if it failed."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            operator.execute({})
        except BaseException as e:
            failures.append(e)

    worker = threading.Thread(target=run)
    worker.start()
    return worker, failures


def run_trigger(trigger: OpenSandboxCommandTrigger) -> dict[str, Any]:
    async def first_event() -> dict[str, Any]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("The trigger ended without an event.")

    return asyncio.run(first_event())


def rebuilt(trigger: OpenSandboxCommandTrigger) -> OpenSandboxCommandTrigger:
    """The trigger as a triggerer makes it: from its serialized arguments only."""
    path, kwargs = trigger.serialize()
    assert path == "opensandbox_provider.triggers.opensandbox.OpenSandboxCommandTrigger"
    return OpenSandboxCommandTrigger(**kwargs)


def test_a_command_that_exits_0_returns_its_exit_code_and_stdout(operator_on, plain_server):
    operator = operator_on(plain_server, command="echo one; echo two >&2; echo three")
    assert operator.execute({}) == {"exit_code": 0, "stdout": "one\nthree\n"}
    assert destroyed(operator._sandbox_id)


def test_a_failing_command_fails_the_task_with_the_end_of_its_stderr(operator_on, plain_server):
    operator = operator_on(
        plain_server, command="for i in $(seq 1 30); do echo err$i >&2; done; exit 3"
    )
    with pytest.raises(AirflowException, match="exited 3") as failure:
        operator.execute({})
    message = str(failure.value)
    assert "err30" in message and "err11" in message and "err10\n" not in message
    assert destroyed(operator._sandbox_id)


def test_a_command_the_out_of_memory_killer_ended_fails_saying_so(operator_on, plain_server):
    # Kubernetes users meet this as an OOMKilled container; here it is the sandbox's cgroup.
    hungry = 'python3 -c "x = bytearray(256 * 2**20)"'
    operator = operator_on(plain_server, command=hungry, memory="64Mi")
    with pytest.raises(AirflowException, match=r"exited (137|-1)") as failure:
        operator.execute({})
    assert "out-of-memory killer ended it" in str(failure.value)
    assert "memory limit (64Mi). Raise memory" in str(failure.value)
    # A SIGKILL from anything else is not called a lack of memory.
    killed = operator_on(plain_server, command="sh -c 'kill -9 $$'", memory="64Mi")
    with pytest.raises(AirflowException, match=r"exited (137|-1)") as other:
        killed.execute({})
    assert "out-of-memory" not in str(other.value)
    assert destroyed(operator._sandbox_id) and destroyed(killed._sandbox_id)


def test_an_exit_code_in_skip_on_exit_code_skips_the_task(operator_on, plain_server):
    operator = operator_on(plain_server, command="exit 99")
    with pytest.raises(AirflowSkipException):
        operator.execute({})
    other = operator_on(plain_server, command="exit 4", skip_on_exit_code=[4, 5])
    with pytest.raises(AirflowSkipException):
        other.execute({})
    assert destroyed(operator._sandbox_id) and destroyed(other._sandbox_id)


def test_a_command_past_its_timeout_fails_the_task_as_timed_out(operator_on, plain_server):
    operator = operator_on(plain_server, command="sleep 30", command_timeout=2)
    with pytest.raises(AirflowException, match="ran out of its 2s"):
        operator.execute({})
    assert destroyed(operator._sandbox_id)


def test_files_go_in_before_the_command_and_outputs_come_out_after(
    operator_on, plain_server, tmp_path
):
    source = tmp_path / "source.bin"
    source.write_bytes(b"\x00\x01binary\n")
    target = ObjectStoragePath(f"file://{tmp_path}/out/result.txt")
    operator = operator_on(
        plain_server,
        workdir="/srv/job",
        files={
            "script.sh": "echo from-script",
            "/srv/data.bin": ObjectStoragePath(f"file://{source}"),
        },
        command="sh script.sh > result.txt; wc -c < /srv/data.bin >> result.txt",
        outputs={"result.txt": target},
    )
    operator.execute({})
    assert (tmp_path / "out" / "result.txt").read_text() == "from-script\n9\n"
    assert destroyed(operator._sandbox_id)


def test_an_output_larger_than_max_file_bytes_fails_the_task(operator_on, plain_server, tmp_path):
    operator = operator_on(
        plain_server,
        command="head -c 5000 /dev/zero > /srv/big",
        outputs={"/srv/big": ObjectStoragePath(f"file://{tmp_path}/big")},
        max_file_bytes=1000,
    )
    with pytest.raises(Exception, match="1000"):
        operator.execute({})
    assert destroyed(operator._sandbox_id)


def test_output_lines_reach_the_task_log_while_the_command_still_runs(
    operator_on, plain_server, lines
):
    operator = operator_on(
        plain_server, command="date +%s.%N; echo first; echo oops >&2; sleep 3; echo second"
    )
    operator.execute({})
    finished = time.time()
    first, second = lines.first(STDOUT + "first"), lines.first(STDOUT + "second")
    # The first line is logged as it is printed, seconds before the command's last line.
    assert second - first > 2.5
    assert finished - first > 2.5
    assert "[sandbox stderr] oops" in lines.messages
    # The command's first line is the time it started, on the sandbox's clock, which is the
    # host's: the container shares its kernel.
    started_at, logged_at = next(
        (float(message.removeprefix(STDOUT)), at)
        for at, message in lines.records
        if message.removeprefix(STDOUT)[:1].isdigit()
    )
    print(f"\ncommand start to its first line in the task log: {logged_at - started_at:.4f}s")


def test_output_past_a_lines_bound_is_cut_with_a_note(operator_on, plain_server, lines):
    operator = operator_on(plain_server, command="head -c 40000 /dev/zero | tr '\\0' a; echo")
    operator.execute({})
    (cut,) = [message for message in lines.messages if message.startswith(STDOUT + "aaaa")]
    assert cut == STDOUT + "a" * 16384 + " [line cut at 16384 bytes]"


def test_killing_the_task_destroys_its_sandbox(operator_on, plain_server, lines):
    operator = operator_on(plain_server, command="echo started; sleep 300")
    worker, failures = executing(operator)
    deadline = time.monotonic() + 60
    while STDOUT + "started" not in lines.messages:
        assert time.monotonic() < deadline, "the command never printed its first line"
        time.sleep(0.05)
    operator.on_kill()
    worker.join(30)
    assert not worker.is_alive()
    assert failures, "the task went on as if it had not been killed"
    assert destroyed(operator._sandbox_id)


def test_the_default_spec_denies_egress_and_is_proven_before_the_command(
    operator_on, plain_server, dns_nft_server, stack
):
    # The server without an egress sidecar cannot enforce the default deny-all spec, so the
    # backend's create refuses it; on the one with a dns+nft sidecar it is proven and holds.
    refused = operator_on(plain_server, command="true", spec=None)
    with pytest.raises(SandboxTerminalError):
        refused.execute({})
    listener = Listener(stack.bridge_ip)
    try:
        connect = (
            f'python3 -c "import socket; '
            f"socket.create_connection(('{stack.bridge_ip}', {listener.port}), 3).close()\""
        )
        denied = operator_on(dns_nft_server, spec=None, command=connect)
        with pytest.raises(AirflowException, match="exited 1"):
            denied.execute({})
        opened = operator_on(dns_nft_server, spec=OPEN, command=connect)
        assert opened.execute({})["exit_code"] == 0
    finally:
        listener.close()
    assert destroyed(denied._sandbox_id) and destroyed(opened._sandbox_id)


def test_a_deferred_command_is_waited_for_by_the_trigger_and_finished_by_the_worker(
    operator_on, plain_server, tmp_path, lines
):
    operator = operator_on(
        plain_server,
        deferrable=True,
        poll_interval=0.2,
        command="echo early; sleep 2; echo late > /srv/out; date +%s.%N",
        outputs={"/srv/out": ObjectStoragePath(f"file://{tmp_path}/out")},
    )
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    assert deferral.value.method_name == "execute_complete"
    event = run_trigger(rebuilt(deferral.value.trigger))
    assert "[sandbox stdout] early" in lines.messages
    assert (event["status"], event["exit_code"], event["timed_out"]) == ("ended", 0, False)
    result = OpenSandboxOperator.execute_complete(operator, {}, event)
    finished = time.time()
    assert result["stdout"].startswith("early\n")
    ended_at = float(result["stdout"].splitlines()[-1])
    assert (tmp_path / "out").read_text() == "late\n"
    assert destroyed(operator._sandbox_id)
    print(f"\ncommand end to task end, deferred: {finished - ended_at:.3f}s")


def test_a_deferred_command_that_fails_fails_the_task_with_its_stderr(operator_on, plain_server):
    operator = operator_on(
        plain_server, deferrable=True, poll_interval=0.2, command="echo fine; echo bad >&2; exit 5"
    )
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    event = run_trigger(rebuilt(deferral.value.trigger))
    with pytest.raises(AirflowException, match="exited 5") as failure:
        operator.execute_complete({}, event)
    assert str(failure.value).endswith(" The last lines of its stderr:\nbad")
    assert destroyed(operator._sandbox_id)


def test_a_command_returns_the_same_xcom_deferred_or_not(operator_on, plain_server, lines):
    command = "echo one; echo two >&2; printf 'three\\r\\n\\n'; echo four >&2; printf 'six\\rfive'"
    foreground = operator_on(plain_server, command=command).execute({})
    operator = operator_on(plain_server, deferrable=True, poll_interval=0.2, command=command)
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    event = run_trigger(rebuilt(deferral.value.trigger))
    assert operator.execute_complete({}, event) == foreground
    # Each line comes back ending in a line feed, as execd's line events do not say otherwise.
    assert foreground == {"exit_code": 0, "stdout": "one\nthree\n\nsix\nfive\n"}
    # The trigger logs each stream as the foreground does.
    assert {
        "[sandbox stderr] two",
        "[sandbox stderr] four",
        "[sandbox stdout] one",
        "[sandbox stdout] three",
    } <= set(lines.messages)


def test_a_trigger_taken_up_again_reads_only_the_tail_of_what_it_missed(
    operator_on, plain_server, lines
):
    operator = operator_on(
        plain_server,
        deferrable=True,
        poll_interval=0.2,
        max_output_bytes=1024,
        command="head -c 300000 /dev/zero | tr '\\0' x; echo; sleep 3; echo after",
    )
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    # The triggerer that took the trigger up first died before it read anything; the next one
    # starts from the serialized cursors, at 0.
    time.sleep(1.5)
    event = run_trigger(rebuilt(deferral.value.trigger))
    result = operator.execute_complete({}, event)
    assert result["stdout"].endswith("xxx\nafter\n") and len(result["stdout"]) == 1024
    noted = [m for m in lines.messages if "are not logged here" in m]
    assert noted == [
        f"[{300001 - 1024} bytes of stdout printed before this triggerer took the command up "
        "are not logged here; the last 1024 bytes follow]"
    ]
    assert destroyed(operator._sandbox_id)


def test_a_deferred_task_killed_while_it_waits_leaves_no_sandbox(operator_on, plain_server):
    operator = operator_on(plain_server, deferrable=True, command="sleep 300")
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    trigger = rebuilt(deferral.value.trigger)

    async def killed_while_waiting() -> None:
        waiting = asyncio.ensure_future(anext(trigger.run()))
        await asyncio.sleep(2)
        waiting.cancel()
        await trigger.on_kill()

    asyncio.run(killed_while_waiting())
    assert destroyed(operator._sandbox_id)


def test_a_deferred_command_on_a_deny_all_sandbox_returns_its_result(operator_on, dns_nft_server):
    operator = operator_on(
        dns_nft_server, spec=None, deferrable=True, poll_interval=0.2, command="echo fine"
    )
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    event = run_trigger(rebuilt(deferral.value.trigger))
    assert operator.execute_complete({}, event) == {"exit_code": 0, "stdout": "fine\n"}
    assert destroyed(operator._sandbox_id)
