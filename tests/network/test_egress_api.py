"""The egress sidecar's HTTP API on :18080 has the real sidecar's wire shape.

Requests go where the SDK sends them: the endpoint and the auth header the server hands out
for port 18080. Expected bodies are byte-exact, as Go's json.Encoder writes them
(docs/execd-wire.rst, wire-egress-api, wire-egress-policy, wire-egress-get, wire-egress-patch,
wire-egress-delete).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from opensandbox import SandboxSync
from opensandbox.models.sandboxes import NetworkPolicy, NetworkRule

from dev.stack.resolver import ALLOWED_NAME, OTHER_NAME
from dev.stack.state import ServerInfo, StackState
from tests.network.sandboxes import allowing, deny_all, egress_api, sandbox

AUTH_HEADER = "OPENSANDBOX-EGRESS-AUTH"
HTTP_BOUND_S = 30


@pytest.fixture(params=["dns_server", "dns_nft_server"])
def egress_server(request: pytest.FixtureRequest) -> ServerInfo:
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def allowlisted(dns_server: ServerInfo, stack: StackState) -> Iterator[SandboxSync]:
    """One sandbox for the tests that leave its policy as it was."""
    with sandbox(dns_server, stack, allowing(ALLOWED_NAME)) as sb:
        yield sb


def call(
    sb: SandboxSync, method: str, path: str, body: object = None, **headers: str
) -> httpx.Response:
    base, auth = egress_api(sb)
    content = None if body is None else body if isinstance(body, str) else json.dumps(body)
    return httpx.request(method, base + path, content=content, headers=auth, timeout=HTTP_BOUND_S)


def go_json(payload: dict) -> str:
    return json.dumps(payload, separators=(",", ":")) + "\n"


def test_get_policy_answers_status_mode_enforcement_mode_and_the_policy(
    egress_server: ServerInfo, stack: StackState
):
    with sandbox(egress_server, stack, allowing(ALLOWED_NAME)) as sb:
        response = call(sb, "GET", "/policy")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    # `enforcementMode` is the mode the server was configured with; key order is Go's.
    assert response.text == go_json(
        {
            "status": "ok",
            "mode": "enforcing",
            "enforcementMode": egress_server.egress_mode,
            "policy": {
                "egress": [{"action": "allow", "target": ALLOWED_NAME}],
                "defaultAction": "deny",
            },
        }
    )


@pytest.mark.parametrize(
    ("policy", "mode"),
    [
        (NetworkPolicy(defaultAction="deny", egress=[]), "deny_all"),
        (NetworkPolicy(defaultAction="allow", egress=[]), "allow_all"),
        (
            NetworkPolicy(
                defaultAction="allow", egress=[NetworkRule(action="deny", target="x.test")]
            ),
            "enforcing",
        ),
    ],
)
def test_mode_is_derived_from_the_default_action_and_the_rule_count(
    dns_server: ServerInfo, stack: StackState, policy: NetworkPolicy, mode: str
):
    with sandbox(dns_server, stack, policy) as sb:
        body = call(sb, "GET", "/policy").json()

    assert body["mode"] == mode


def test_a_policy_created_without_egress_reaches_the_sidecar_as_an_empty_list(
    dns_server: ServerInfo, stack: StackState
):
    # The SDK leaves the list out, but the server fills in `[]` before it starts the sidecar,
    # so the read-back never meets the `"egress": null` that the SDK's model cannot parse.
    with sandbox(dns_server, stack, NetworkPolicy(defaultAction="deny")) as sb:
        raw = call(sb, "GET", "/policy").json()
        read_back = sb.get_egress_policy()

    assert raw["policy"] == {"egress": [], "defaultAction": "deny"}
    assert raw["mode"] == "deny_all"
    assert read_back == NetworkPolicy(defaultAction="deny", egress=[])


def test_patch_puts_new_rules_first_and_answers_without_the_policy(
    egress_server: ServerInfo, stack: StackState
):
    with sandbox(egress_server, stack, allowing(ALLOWED_NAME, OTHER_NAME)) as sb:
        response = call(sb, "PATCH", "/policy", [{"action": "deny", "target": OTHER_NAME.upper()}])
        policy = call(sb, "GET", "/policy").json()["policy"]

    assert response.status_code == 200
    assert response.text == go_json(
        {"status": "ok", "mode": "enforcing", "enforcementMode": egress_server.egress_mode}
    )
    # The patched target replaces the old rule for the same name, compared case-insensitively.
    assert policy["egress"] == [
        {"action": "deny", "target": OTHER_NAME.upper()},
        {"action": "allow", "target": ALLOWED_NAME},
    ]


def test_the_sdk_patches_and_deletes_rules(dns_server: ServerInfo, stack: StackState):
    with sandbox(dns_server, stack, deny_all()) as sb:
        sb.patch_egress_rules([NetworkRule(action="allow", target=ALLOWED_NAME)])
        patched = sb.get_egress_policy()
        sb.delete_egress_rules([ALLOWED_NAME])
        deleted = sb.get_egress_policy()

    assert patched == allowing(ALLOWED_NAME)
    assert deleted == deny_all()


def test_delete_reports_when_no_target_matched_and_empties_to_a_list_not_null(
    dns_server: ServerInfo, stack: StackState
):
    with sandbox(dns_server, stack, allowing(ALLOWED_NAME)) as sb:
        missed = call(sb, "DELETE", "/policy", ["nothing.test"])
        removed = call(sb, "DELETE", "/policy", [ALLOWED_NAME.upper()])
        after = call(sb, "GET", "/policy").json()

    assert missed.text == go_json(
        {
            "status": "ok",
            "mode": "enforcing",
            "enforcementMode": "dns",
            "reason": "no matching targets found",
        }
    )
    assert removed.text == go_json({"status": "ok", "mode": "deny_all", "enforcementMode": "dns"})
    assert after["policy"] == {"egress": [], "defaultAction": "deny"}


@pytest.mark.parametrize(
    ("method", "body", "message"),
    [
        ("PATCH", "", "empty body"),
        ("PATCH", "[]", "invalid patch rules: empty array"),
        (
            "PATCH",
            [{"action": "maybe", "target": "a.test"}],
            'invalid merged policy: unsupported action "maybe"',
        ),
        (
            "PATCH",
            [{"action": "allow", "target": " "}],
            "invalid merged policy: egress target cannot be empty",
        ),
        ("DELETE", "", "empty body"),
        ("DELETE", "[]", "invalid delete targets: empty array"),
    ],
)
def test_bad_patch_and_delete_bodies_are_400_with_the_sidecars_message(
    allowlisted: SandboxSync, method: str, body: object, message: str
):
    response = call(allowlisted, method, "/policy", body)
    unchanged = call(allowlisted, "GET", "/policy").json()["policy"]

    assert response.status_code == 400
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == message + "\n"
    assert unchanged == {
        "egress": [{"action": "allow", "target": ALLOWED_NAME}],
        "defaultAction": "deny",
    }


@pytest.mark.parametrize("token", ["wrong", None])
def test_a_wrong_or_missing_token_is_401_unauthorized_in_plain_text(
    allowlisted: SandboxSync, token: str | None
):
    base, headers = egress_api(allowlisted)
    assert headers.pop(AUTH_HEADER, None), "The server handed out no egress token for port 18080."
    if token is not None:
        headers[AUTH_HEADER] = token
    response = httpx.get(base + "/policy", headers=headers, timeout=HTTP_BOUND_S)

    assert response.status_code == 401
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == "unauthorized\n"


def test_healthz_answers_ok_without_a_token(allowlisted: SandboxSync):
    base, headers = egress_api(allowlisted)
    # Without the token, but with the route's own headers: behind an ingress gateway the
    # endpoint's headers also say which sandbox to route to.
    assert headers.pop(AUTH_HEADER, None), "The server handed out no egress token for port 18080."
    response = httpx.get(base + "/healthz", headers=headers, timeout=HTTP_BOUND_S)

    assert response.status_code == 200
    assert response.text == "ok"
