"""
Reading the egress sidecar's policy back: a failed read is made again, a changed one is not,
and a sidecar that answers without its token is refused.
"""

from __future__ import annotations

import time

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec

from opensandbox_provider.egress import _policy
from opensandbox_provider.egress._policy import network_policy, unenforced
from tests.unit.egress.test_policy import sidecar_answer
from tests.unit.sandbox_server import SILENT, Scripted, sandbox_services

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
    assert problem is not None and "not default 'deny'" in problem
    assert script.asked == [POLICY]


def test_a_sidecar_that_keeps_failing_is_given_up_after_the_last_read() -> None:
    script = Scripted({POLICY: [PROXY_502]})
    with sandbox_services(script) as http:
        problem = unenforced(http, DENY_ALL)
    assert problem is not None
    assert script.asked == [POLICY] * _policy.POLICY_READ_ATTEMPTS
    assert f"in {_policy.POLICY_READ_ATTEMPTS} reads" in problem
    assert "HTTP 502" in problem or "upstream connection reset" in problem


def test_a_silent_sidecar_is_given_up_within_the_window(monkeypatch) -> None:
    monkeypatch.setattr(_policy, "POLICY_READ_WINDOW", 1.0)
    script = Scripted({POLICY: [SILENT]})
    with sandbox_services(script) as http:
        started = time.monotonic()
        problem = unenforced(http, DENY_ALL)
        took = time.monotonic() - started
    assert problem is not None and "could not be read back" in problem
    # The window is 1 s; the bound here leaves three times that for a loaded machine.
    assert took < 3.0


def test_a_sidecar_that_answers_without_its_token_is_refused_and_says_what_it_leaves_open() -> None:
    script = Scripted({POLICY: [(200, sidecar_answer())]}, sidecar_checks_token=False)
    with sandbox_services(script) as http:
        problem = unenforced(http, DENY_ALL)
    assert problem is not None
    assert "answered HTTP 200, not 401, to a request without its token" in problem
    assert "code in the sandbox could rewrite its own policy" in problem


def test_a_sidecar_that_refuses_a_request_without_its_token_passes() -> None:
    script = Scripted({POLICY: [(200, sidecar_answer())]})
    with sandbox_services(script) as http:
        assert unenforced(http, DENY_ALL) is None
    # The read without the token never reached the script: the sidecar refused it first.
    assert script.asked == [POLICY]
