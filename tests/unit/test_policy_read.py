"""Reading the egress sidecar's policy back: a failed read is made again, a changed one is not."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec

from opensandbox_provider.egress import _policy
from opensandbox_provider.egress._policy import PolicyUnproven, network_policy, unenforced
from opensandbox_provider.sandbox.backend import OpenSandboxBackend
from tests.unit.sandbox_server import SILENT, Scripted, sandbox_services
from tests.unit.test_policy import sidecar_answer

POLICY = "/proxy/18080/policy"
DENY_ALL = network_policy(SandboxSpec())
PROXY_502 = (502, {"code": "BAD_GATEWAY", "message": "upstream connection reset"})


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_policy, "POLICY_READ_PAUSE", 0.05)


def test_one_failed_read_of_the_policy_is_made_again_and_the_answer_counts() -> None:
    script = Scripted({POLICY: [PROXY_502, (200, sidecar_answer())]})
    with sandbox_services(script) as http:
        assert unenforced(http, DENY_ALL) is None
    assert script.asked == [POLICY, POLICY]


def test_a_policy_that_differs_is_not_read_again() -> None:
    script = Scripted({POLICY: [(200, sidecar_answer(default="allow")), (200, sidecar_answer())]})
    with sandbox_services(script) as http:
        problem = unenforced(http, DENY_ALL)
    assert problem is not None and problem.answered
    assert "not default 'deny'" in problem.why
    assert script.asked == [POLICY]


def test_a_sidecar_that_keeps_failing_is_given_up_after_the_last_read() -> None:
    script = Scripted({POLICY: [PROXY_502]})
    with sandbox_services(script) as http:
        problem = unenforced(http, DENY_ALL)
    assert problem is not None and not problem.answered
    assert script.asked == [POLICY] * _policy.POLICY_READ_ATTEMPTS
    assert f"in {_policy.POLICY_READ_ATTEMPTS} reads" in problem.why
    assert "HTTP 502" in problem.why or "upstream connection reset" in problem.why


def test_a_silent_sidecar_is_given_up_within_the_window(monkeypatch) -> None:
    monkeypatch.setattr(_policy, "POLICY_READ_WINDOW", 1.0)
    script = Scripted({POLICY: [SILENT]})
    with sandbox_services(script) as http:
        started = time.monotonic()
        problem = unenforced(http, DENY_ALL)
        took = time.monotonic() - started
    assert problem is not None and not problem.answered
    # The window is 1 s; the bound here leaves three times that for a loaded machine.
    assert took < 3.0


class Rechecked(OpenSandboxBackend):
    """A backend whose destroy is only recorded, to see what a re-check does."""

    def __init__(self) -> None:
        super().__init__(None)
        self.destroyed: list[str] = []

    def _destroy_quietly(self, sandbox: str, *, after: str) -> None:
        self.destroyed.append(sandbox)


def recheck(http) -> Rechecked:
    backend = Rechecked()
    record = SimpleNamespace(sdk=SimpleNamespace(id="sbx"), http=http, proven_policy=DENY_ALL)
    backend._recheck_policy(record, after="after its command")  # type: ignore[arg-type]
    return backend


def test_a_recheck_after_one_proxy_error_keeps_the_sandbox() -> None:
    with sandbox_services(Scripted({POLICY: [PROXY_502, (200, sidecar_answer())]})) as http:
        assert recheck(http).destroyed == []


def test_a_recheck_that_cannot_read_the_policy_destroys_the_sandbox_and_says_why() -> None:
    with sandbox_services(Scripted({POLICY: [PROXY_502]})) as http:
        with pytest.raises(PolicyUnproven) as raised:
            recheck(http)
    message = str(raised.value)
    assert message.startswith(
        "Sandbox sbx could not be shown to enforce the network policy it was created with, so "
        "it was destroyed after its command: its policy could not be read back"
    )


def test_a_recheck_that_finds_the_policy_changed_says_it_changed() -> None:
    with sandbox_services(Scripted({POLICY: [(200, sidecar_answer(default="allow"))]})) as http:
        with pytest.raises(PolicyUnproven, match="no longer enforces the network policy"):
            recheck(http)
