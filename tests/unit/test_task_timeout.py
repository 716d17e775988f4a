"""
Airflow's task timeout, and Ctrl-C, end the task wherever they land: no handler takes them for
a failed request and carries on.

Airflow raises its timeout from SIGALRM in whatever frame the task is in. Airflow 3's is a
``BaseException``; Airflow 2's is an ``AirflowException``, so an ``except Exception`` catches
it: each case runs with both, and with KeyboardInterrupt.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.providers.common.compat import sdk as compat_sdk
from airflow.providers.common.compat.sdk import AirflowException, AirflowTaskTimeout

from opensandbox_provider import _identity
from opensandbox_provider.egress import _policy
from opensandbox_provider.egress._policy import network_policy, unenforced
from opensandbox_provider.execd._recovery import await_end
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from tests.unit.sandbox_server import SILENT, Scripted, sandbox_services


class Airflow2TaskTimeout(AirflowException):
    """Airflow 2's task timeout, which subclasses AirflowException, an Exception."""


INTERRUPTS = [AirflowTaskTimeout, Airflow2TaskTimeout, KeyboardInterrupt]
# How long after it is raised the interrupt must have come out: far more than a raise takes,
# far less than any bound the code under test would otherwise wait out.
PROMPTLY = 3.0


@contextmanager
def raised_by_alarm(interrupt: type[BaseException], after: float) -> Iterator[None]:
    """Raise ``interrupt`` from SIGALRM ``after`` seconds in, as Airflow's timeout does."""

    def handler(signum: int, frame: object) -> None:
        raise interrupt("Timeout, PID: 1")

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, after)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_a_timeout_during_a_policy_read_ends_the_check(interrupt) -> None:
    with sandbox_services(Scripted({"/proxy/18080/policy": [SILENT]})) as http:
        started = time.monotonic()
        with pytest.raises(interrupt), raised_by_alarm(interrupt, 0.3):
            unenforced(http, network_policy(SandboxSpec()))
        assert time.monotonic() - started < PROMPTLY
    assert _policy.POLICY_READ_WINDOW > PROMPTLY  # else the window, not the raise, ended it


def status_path(command_id: str) -> str:
    return f"/proxy/44772/command/status/{command_id}"


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_a_timeout_while_a_broken_command_is_recovered_ends_the_recovery(interrupt) -> None:
    with sandbox_services(Scripted({status_path("cid"): [SILENT]})) as http:
        now = time.monotonic()
        with pytest.raises(interrupt), raised_by_alarm(interrupt, 0.3):
            await_end(
                http,
                44772,
                "cid",
                last_contact=now,
                give_up_at=now + 60,
                overran="the backstop passed",
                gone=lambda: False,
            )
        assert time.monotonic() - now < PROMPTLY


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_a_timeout_while_asking_whether_the_sandbox_is_gone_ends_the_recovery(interrupt) -> None:
    # A proxy refusing the status request makes the recovery ask the server about the sandbox.
    refused = (502, {"code": "BAD_GATEWAY", "message": "no upstream"})

    def gone() -> bool:
        raise interrupt("Timeout, PID: 1")

    with sandbox_services(Scripted({status_path("cid"): [refused]})) as http:
        now = time.monotonic()
        with pytest.raises(interrupt):
            await_end(
                http,
                44772,
                "cid",
                last_contact=now,
                give_up_at=now + 60,
                overran="the backstop passed",
                gone=gone,
            )
        assert time.monotonic() - now < PROMPTLY


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_a_timeout_while_the_operator_destroys_its_sandbox_is_not_swallowed(interrupt) -> None:
    def destroy(sandbox: str) -> None:
        raise interrupt("Timeout, PID: 1")

    operator = OpenSandboxOperator(task_id="t", command="true")
    with pytest.raises(interrupt):
        operator._destroy(SimpleNamespace(destroy=destroy), "sbx")  # type: ignore[arg-type]


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_a_timeout_while_the_task_identity_is_read_is_not_taken_for_no_task(
    interrupt, monkeypatch
) -> None:
    def get_current_context() -> dict:
        raise interrupt("Timeout, PID: 1")

    monkeypatch.setattr(compat_sdk, "get_current_context", get_current_context)
    with pytest.raises(interrupt):
        _identity.current_identity()


def test_outside_a_task_there_is_no_identity() -> None:
    assert _identity.current_identity() == {}
