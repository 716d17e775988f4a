"""A spec's network fields as an OpenSandbox policy, and the check of what the sidecar reports."""

from __future__ import annotations

import re

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from opensandbox_provider.egress._policy import describe, enforcement_problem, network_policy


def targets(spec: SandboxSpec) -> list[str]:
    policy = network_policy(spec)
    assert policy is not None and policy.default_action == "deny"
    return [rule.target for rule in policy.egress or ()]


def sidecar_answer(
    default: str = "deny", allowed: list[str] | None = None, mode: str | None = "dns+nft"
) -> dict:
    """The sidecar's GET /policy answer (docs/execd-wire.rst, wire-egress-get): no rules is a null
    list."""
    rules = [{"action": "allow", "target": target} for target in allowed] if allowed else None
    answer: dict = {
        "status": "ok",
        "mode": "enforcing",
        "policy": {"defaultAction": default, "egress": rules},
    }
    if mode is not None:
        answer["enforcementMode"] = mode
    return answer


def test_no_spec_sends_no_policy() -> None:
    assert network_policy(None) is None


def test_an_open_spec_sends_no_policy_so_a_server_without_the_sidecar_runs_it() -> None:
    assert network_policy(SandboxSpec(block_network=False)) is None


def test_the_default_spec_denies_all_egress() -> None:
    assert targets(SandboxSpec()) == []


def test_an_allowlist_becomes_one_allow_rule_per_host() -> None:
    spec = SandboxSpec(allow_egress_to=["data.example.com", "*.example.com", "files.example.net"])
    assert targets(spec) == ["data.example.com", "*.example.com", "files.example.net"]


def test_an_allowlist_without_block_network_is_refused() -> None:
    with pytest.raises(SandboxTerminalError, match="block_network=True"):
        network_policy(SandboxSpec(block_network=False, allow_egress_to=["data.example.com"]))


def test_address_ranges_become_allow_rules_beside_the_hosts() -> None:
    spec = SandboxSpec(
        allow_egress_to=["data.example.com"], allow_egress_to_cidrs=["203.0.113.7/32"]
    )
    assert targets(spec) == ["data.example.com", "203.0.113.7/32"]


def test_address_ranges_without_block_network_are_refused() -> None:
    spec = SandboxSpec(block_network=False, allow_egress_to_cidrs=["203.0.113.0/24"])
    with pytest.raises(SandboxTerminalError, match="block_network=True"):
        network_policy(spec)


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [
        ("allow_egress_to", "data.example.com", "host names"),
        ("allow_egress_to_cidrs", "203.0.113.0/24", "IPv4 ranges"),
    ],
)
def test_a_bare_string_allowlist_is_refused_rather_than_read_letter_by_letter(
    field: str, value: str, kind: str
) -> None:
    expected = f"SandboxSpec.{field} is the string '{value}'; it must be a list of {kind}"
    with pytest.raises(SandboxTerminalError, match=re.escape(expected)):
        network_policy(SandboxSpec(**{field: value}))


@pytest.mark.parametrize(
    "host",
    [
        "https://data.example.com",
        "data.example.com:443",
        "data.example.com/simple",
        "",
        " ",
        "a b",
        "-x.org",
        7,
    ],
)
def test_an_allowlist_entry_that_is_not_a_host_name_is_refused(host: object) -> None:
    with pytest.raises(SandboxTerminalError, match="not a host name"):
        network_policy(SandboxSpec(allow_egress_to=[host]))  # type: ignore[list-item]


@pytest.mark.parametrize("address", ["203.0.113.7", "10.0.0.1"])
def test_an_address_in_the_host_allowlist_is_refused(address: str) -> None:
    with pytest.raises(SandboxTerminalError, match="allow_egress_to_cidrs"):
        network_policy(SandboxSpec(allow_egress_to=[address]))


def test_policies_are_described_for_the_task_log() -> None:
    assert describe(None) == "no network policy (egress open)"
    assert describe(network_policy(SandboxSpec())) == "all egress denied"
    allowlist = network_policy(SandboxSpec(allow_egress_to=["a.test", "b.test"]))
    assert describe(allowlist) == "egress denied except to a.test, b.test"


def test_a_deny_all_policy_enforced_at_the_address_layer_passes() -> None:
    # The real sidecar reports "egress": null for a policy without rules, which the SDK's
    # get_egress_policy cannot read.
    assert enforcement_problem(sidecar_answer(), network_policy(SandboxSpec())) is None


def test_an_allowlist_enforced_as_asked_passes_whatever_the_case_of_its_names() -> None:
    requested = network_policy(SandboxSpec(allow_egress_to=["Allowed.Test"]))
    assert enforcement_problem(sidecar_answer(allowed=["allowed.test."]), requested) is None


def test_a_dns_only_sidecar_is_refused() -> None:
    problem = enforcement_problem(sidecar_answer(mode="dns"), network_policy(SandboxSpec()))
    assert problem is not None and "'dns' mode" in problem and 'mode = "dns+nft"' in problem


def test_a_sidecar_that_does_not_report_its_mode_is_refused() -> None:
    problem = enforcement_problem(sidecar_answer(mode=None), network_policy(SandboxSpec()))
    assert problem is not None and "does not report its enforcement mode" in problem


@pytest.mark.parametrize(
    "answer",
    [
        sidecar_answer(default="allow"),
        sidecar_answer(allowed=["other.test"]),
        sidecar_answer(allowed=["allowed.test", "extra.test"]),
    ],
)
def test_a_policy_other_than_the_one_asked_for_is_refused(answer: dict) -> None:
    requested = network_policy(SandboxSpec(allow_egress_to=["allowed.test"]))
    problem = enforcement_problem(answer, requested)
    assert problem is not None and "not default 'deny'" in problem


@pytest.mark.parametrize("answer", [None, {}, {"status": "ok"}, "text", {"policy": []}])
def test_an_answer_without_a_policy_is_refused(answer: object) -> None:
    assert enforcement_problem(answer, network_policy(SandboxSpec())) is not None
