"""
A spec's network fields as an OpenSandbox network policy, and the proof that it is enforced.

A server may accept a policy it does not enforce, and a sidecar in ``dns`` mode filters name
lookups only, so after a deny-by-default create the sidecar's own account of the policy and
its mode is read back, once, before any guest code runs: every route to the sidecar passes
through the sandbox, so a later read would hand the guest its token (docs/egress.rst).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider import _metrics
from opensandbox_provider._clients import read_at_most
from opensandbox_provider._errors import (
    ErrorAnswer,
    quoted,
    status_of,
    to_sandbox_error,
    transport_errors,
)
from opensandbox_provider.execd._deadline import bounded_by
from opensandbox_provider.execd._http import SandboxHttp

if TYPE_CHECKING:
    from airflow.providers.common.ai.sandbox.base import SandboxSpec
    from opensandbox.models.sandboxes import NetworkPolicy

EGRESS_PORT = 18080
# The header the server's port-18080 endpoint carries the sidecar's token in
# (docs/execd-wire.rst, wire-egress-api).
EGRESS_AUTH_HEADER = "OPENSANDBOX-EGRESS-AUTH"
# Only this mode drops connections at the address layer as well as filtering names
# (docs/execd-wire.rst, wire-egress-modes).
ADDRESS_LAYER_MODE = "dns+nft"
# The sidecar's answer is a policy; a bigger body is not one worth reading.
_MAX_POLICY_BODY = 1024 * 1024
# A read of the policy that fails is made again, up to this many reads in all, within
# POLICY_READ_WINDOW seconds of the first: the server's proxy answers 502 for a moment while
# it reconnects to a sandbox, and one such answer is not a changed policy. A sidecar that
# answers nothing usable for that long is taken to enforce nothing; each second spent here
# holds a command's result back, and a sandbox whose sidecar is gone must not run another.
POLICY_READ_ATTEMPTS = 4
POLICY_READ_WINDOW = 10.0
# The pause between two reads: long enough for a proxy to reconnect, short enough that all
# the reads fit the window.
POLICY_READ_PAUSE = 1.0

log = logging.getLogger(__name__)


# A host name, or a "*." wildcard over one, as the sidecar matches them.
_HOSTNAME = re.compile(
    r"(\*\.)?(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*"
)


def network_policy(spec: SandboxSpec | None) -> NetworkPolicy | None:
    """
    The policy to create the sandbox with; ``None`` for an open spec, so a server without the
    egress sidecar can still run it. Raises :class:`SandboxTerminalError` for one not enforceable.
    """
    targets = allowed_targets(spec)
    if targets is None:
        return None
    from opensandbox.models.sandboxes import NetworkPolicy, NetworkRule

    rules = [NetworkRule(action="allow", target=target) for target in targets]
    return NetworkPolicy(defaultAction="deny", egress=rules or None)


def allowed_targets(spec: SandboxSpec | None) -> list[str] | None:
    """
    The hosts and ranges a deny-by-default spec allows, checked and in the sidecar's form, or
    ``None`` for a spec that denies nothing. Needs no SDK, so the operator runs it when the Dag
    is parsed. Raises :class:`SandboxTerminalError` for a spec this backend cannot enforce.
    """
    if spec is None:
        return None
    hosts = _hostnames(spec.allow_egress_to)
    ranges = _ranges(spec.allow_egress_to_cidrs)
    if spec.block_network:
        return hosts + ranges
    named = {"allow_egress_to": (hosts, "hosts"), "allow_egress_to_cidrs": (ranges, "ranges")}
    for field, (given, what) in named.items():
        if given:
            raise SandboxTerminalError(
                f"SandboxSpec.{field} narrows a sandbox that denies egress, but this spec sets "
                "block_network=False, which allows everything. Set block_network=True to allow "
                f"only those {what}, or drop {field}."
            )
    return None


def explain_refusal(error: Exception, policy: NetworkPolicy | None) -> Exception:
    """A create refused for its network policy, with what to do about it; any other as it is."""
    if policy is None or status_of(error) != 400 or "networkpolicy" not in str(error).lower():
        return error
    detail = to_sandbox_error(error, "create a sandbox", terminal=True)
    return SandboxTerminalError(
        f"{detail} The server cannot enforce a network policy, which a sandbox that denies egress "
        f"needs: configure its egress sidecar ([egress] with mode {ADDRESS_LAYER_MODE}), or pass "
        "SandboxSpec(block_network=False) for a sandbox that may reach the network."
    )


def describe(policy: NetworkPolicy | None) -> str:
    """The policy in a few words, for the task log."""
    if policy is None:
        return "no network policy (egress open)"
    hosts = [rule.target for rule in policy.egress or ()]
    return f"egress denied except to {', '.join(hosts)}" if hosts else "all egress denied"


def require_enforced(http: SandboxHttp, requested: NetworkPolicy, *, sandbox: str) -> None:
    """
    Fail closed: refuse ``sandbox`` unless its sidecar enforces ``requested`` as asked. Only
    for a sandbox no guest code has run in yet: the read carries the sidecar's token.
    """
    problem = unenforced(http, requested)
    if problem is not None:
        _metrics.count(_metrics.POLICY_UNENFORCED)
        raise SandboxTerminalError(
            f"OpenSandbox did not enforce the requested network policy on sandbox "
            f"{sandbox}, so it was destroyed: {problem} Or pass "
            "SandboxSpec(block_network=False) for a sandbox that may reach the network."
        )


def unenforced(http: SandboxHttp, requested: NetworkPolicy) -> str | None:
    """
    What keeps the sandbox's sidecar from enforcing ``requested`` at the address layer, or
    from keeping it against the guest, as a sentence; ``None`` when nothing does.

    Reads ``GET /policy`` itself rather than through the SDK, whose ``get_egress_policy``
    drops the enforcement mode and fails on the ``"egress": null`` the sidecar reports
    for a policy without rules (docs/execd-wire.rst, wire-egress-get); then asks once more
    without the token, which must be refused. A read that fails is made again as
    :data:`POLICY_READ_ATTEMPTS` says.
    """
    started = time.monotonic()
    give_up_at = started + POLICY_READ_WINDOW
    # A failed request, or an answer that is not JSON.
    unread: tuple[type[Exception], ...] = (*transport_errors(), ValueError, RecursionError)
    attempt = 0
    while True:
        attempt += 1
        try:
            problem = enforcement_problem(_read_policy(http, give_up_at), requested)
            if problem is None:
                problem = _token_problem(_status_without_token(http, give_up_at))
        except unread as e:
            if attempt < POLICY_READ_ATTEMPTS and (
                time.monotonic() + POLICY_READ_PAUSE < give_up_at
            ):
                log.info(
                    "Could not read the egress sidecar's policy (%s: %s); reading it again in %gs.",
                    type(e).__name__,
                    quoted(e, 200),
                    POLICY_READ_PAUSE,
                )
                time.sleep(POLICY_READ_PAUSE)
                continue
            return (
                f"its policy could not be read back from the egress sidecar in {attempt} "
                f"{'read' if attempt == 1 else 'reads'} over {time.monotonic() - started:.1f}s "
                f"(the last failed with {type(e).__name__}: {quoted(e, 200)}). The server may be "
                "running without an egress sidecar, or the sandbox may have stopped answering."
            )
        return problem


def _read_policy(http: SandboxHttp, give_up_at: float) -> Any:
    """The sidecar's ``GET /policy`` answer, parsed; whatever keeps it from being read raises."""
    timeout = max(0.0, give_up_at - time.monotonic())
    with (
        bounded_by(give_up_at),
        http.stream(
            "GET", EGRESS_PORT, "/policy", "Get egress policy", timeout=timeout
        ) as response,
    ):
        body = read_at_most(response, _MAX_POLICY_BODY)
    if body is None:
        raise ValueError(f"the answer ran past {_MAX_POLICY_BODY} bytes")
    return json.loads(body)


def _status_without_token(http: SandboxHttp, give_up_at: float) -> int:
    """The status the sidecar answers ``GET /policy`` with when the request carries no token."""
    timeout = max(0.0, give_up_at - time.monotonic())
    try:
        with (
            bounded_by(give_up_at),
            http.stream(
                "GET",
                EGRESS_PORT,
                "/policy",
                "Get egress policy without its token",
                headers={EGRESS_AUTH_HEADER: None},
                timeout=timeout,
            ) as response,
        ):
            return response.status_code
    except ErrorAnswer as e:
        status = status_of(e)
        # A 5xx is the proxy's moment of reconnecting, as for the read with the token.
        if status is None or status >= 500:
            raise
        return status


# How the proof says a sidecar takes requests without a token; a caller with more to say
# about why (a server pool's pods carry none) looks for it.
TAKES_NO_TOKEN = "to a request without its token"


def _token_problem(status: int) -> str | None:
    """What a sidecar that answers ``status`` to a request without its token leaves open."""
    if status == 401:
        return None
    return (
        f"the egress sidecar answered HTTP {status}, not 401, {TAKES_NO_TOKEN}, "
        "so code in the sandbox could rewrite its own policy. Run an OpenSandbox server that "
        "gives each egress sidecar a token, as the Docker and Kubernetes runtimes of "
        "opensandbox-server 1.1.1 do."
    )


def enforcement_problem(status: Any, requested: NetworkPolicy) -> str | None:
    """What differs between the sidecar's ``GET /policy`` answer and ``requested``, or ``None``."""
    if not isinstance(status, Mapping) or not isinstance(status.get("policy"), Mapping):
        return f"the egress sidecar answered with no policy ({quoted(status, 200)})."
    policy = status["policy"]
    rules = policy.get("egress") or []
    allowed = {
        _normalized(rule.get("target"))
        for rule in rules
        if isinstance(rule, Mapping) and rule.get("action") == "allow"
    }
    wanted = {_normalized(rule.target) for rule in requested.egress or ()}
    if policy.get("defaultAction") != "deny" or allowed != wanted:
        return (
            f"the sidecar enforces default {policy.get('defaultAction')!r} allowing "
            f"{sorted(map(str, allowed)) or 'nothing'}, not default 'deny' allowing "
            f"{sorted(wanted) or 'nothing'}."
        )
    mode = status.get("enforcementMode")
    if mode == ADDRESS_LAYER_MODE:
        return None
    if not mode:
        return (
            "the egress sidecar does not report its enforcement mode, so it cannot be shown to "
            f"block connections to addresses. Run an egress sidecar that reports one, in "
            f'"{ADDRESS_LAYER_MODE}" mode.'
        )
    return (
        f"the egress sidecar enforces it in {mode!r} mode, which filters name lookups only: the "
        "sandbox could still connect to any numeric address. Set "
        f'[egress] mode = "{ADDRESS_LAYER_MODE}" in the OpenSandbox server configuration.'
    )


def _listed(values: Iterable[str] | None, field: str, kind: str) -> list:
    """A spec field's values; ``None`` is none, and a bare string is refused, not iterated."""
    if values is None:
        return []
    if isinstance(values, str):
        raise SandboxTerminalError(
            f"SandboxSpec.{field} is the string {values!r}; it must be a list of {kind}, "
            f"such as [{values!r}]."
        )
    return list(values)


def _hostnames(hosts: Iterable[str] | None) -> list[str]:
    checked = []
    for host in _listed(hosts, "allow_egress_to", "host names"):
        if not isinstance(host, str) or not _HOSTNAME.fullmatch(host.strip()):
            raise SandboxTerminalError(
                f"SandboxSpec.allow_egress_to holds {host!r}, which is not a host name. List bare "
                "names such as 'data.example.com' or '*.example.com', with no scheme, port or path."
            )
        if _is_address(host.strip()):
            raise SandboxTerminalError(
                f"SandboxSpec.allow_egress_to holds the address {host!r}; it takes host names. "
                "Addresses belong in allow_egress_to_cidrs."
            )
        checked.append(host.strip())
    return checked


def _ranges(ranges: Iterable[str] | None) -> list[str]:
    """The ranges as canonical IPv4 networks, refusing anything the sidecar would not enforce."""
    checked = []
    for value in _listed(ranges, "allow_egress_to_cidrs", "IPv4 ranges"):
        text = str(value).strip()
        try:
            network = ipaddress.ip_network(text)
        except ValueError:
            try:
                loose = ipaddress.ip_network(text, strict=False)
            except ValueError:
                raise SandboxTerminalError(
                    f"SandboxSpec.allow_egress_to_cidrs holds {value!r}, which is not an IPv4 "
                    "range in CIDR notation, such as '203.0.113.0/24' or '203.0.113.7/32'."
                ) from None
            raise SandboxTerminalError(
                f"SandboxSpec.allow_egress_to_cidrs holds {value!r}, which has host bits set: "
                f"write the range as '{loose}', or one address as '{text.split('/')[0]}/32'."
            ) from None
        if network.version != 4:
            # The sidecar disables IPv6 in the sandbox by default, so it has nothing to allow.
            raise SandboxTerminalError(
                f"SandboxSpec.allow_egress_to_cidrs holds {value!r}; only IPv4 ranges are "
                "enforced. List IPv4 ranges."
            )
        if network.prefixlen == 0:
            raise SandboxTerminalError(
                f"SandboxSpec.allow_egress_to_cidrs holds {value!r}, which is every address. For "
                "a sandbox that may reach the network, pass SandboxSpec(block_network=False)."
            )
        checked.append(str(network))
    return checked


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _normalized(target: Any) -> str:
    text = str(target).strip().rstrip(".").lower()
    try:
        # One address and its /32 are the same target to the sidecar.
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        return text
