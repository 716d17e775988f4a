"""The sidecar's network policy: parsing, evaluation of names, and the PATCH/DELETE merges.

Every rule here reproduces `components/egress/pkg/policy/policy.go` and
`components/egress/policy_utils.go` of OpenSandbox (docs/execd-wire.rst, wire-egress-policy,
wire-egress-patch, wire-egress-delete).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

ALLOW = "allow"
DENY = "deny"

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class PolicyError(ValueError):
    """A policy or rule the sidecar refuses; the message is the one it answers with."""


@dataclass(frozen=True)
class Rule:
    action: str
    target: str

    @property
    def network(self) -> IPNetwork | None:
        """The IP or CIDR a target names, or None for a domain target; the kind is decided by
        parsing (docs/execd-wire.rst, wire-egress-policy)."""
        try:
            return ipaddress.ip_network(self.target, strict=False)
        except ValueError:
            return None

    def matches_name(self, name: str) -> bool:
        # Exact names and `*.suffix`; the wildcard does not match the bare suffix
        # (docs/execd-wire.rst, wire-egress-policy).
        pattern = self.target.lower()
        if pattern.startswith("*."):
            return name.endswith(pattern[1:]) and name != pattern[2:]
        return name == pattern

    def to_json(self) -> dict[str, str]:
        return {"action": self.action, "target": self.target}


@dataclass(frozen=True)
class Policy:
    default_action: str = DENY
    # None reproduces the Go nil slice, which the sidecar serializes as `"egress": null`
    # (docs/execd-wire.rst, wire-egress-policy).
    egress: tuple[Rule, ...] | None = None

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self.egress or ()

    @property
    def mode(self) -> str:
        # `modeFromPolicy` (docs/execd-wire.rst, wire-egress-policy).
        if not self.rules:
            return "allow_all" if self.default_action == ALLOW else "deny_all"
        return "enforcing"

    def evaluate(self, name: str) -> str:
        """Allow or deny for a queried name: the first matching domain rule wins
        (docs/execd-wire.rst, wire-egress-policy)."""
        name = name.rstrip(".").lower()
        for rule in self.rules:
            if rule.network is None and rule.matches_name(name):
                return rule.action
        return self.default_action

    def networks(self, action: str) -> list[IPNetwork]:
        """The IP/CIDR targets with `action`, which only nftables enforces
        (docs/execd-wire.rst, wire-egress-modes)."""
        return [r.network for r in self.rules if r.action == action and r.network is not None]

    def to_json(self) -> dict[str, object]:
        # Go encodes struct fields in declaration order: `egress`, then `defaultAction`.
        egress = None if self.egress is None else [r.to_json() for r in self.egress]
        return {"egress": egress, "defaultAction": self.default_action}


def _decode_json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError(str(exc)) from exc


def _normalize_action(value: str, default: str) -> str:
    action = value.strip().lower() or default
    if action not in (ALLOW, DENY):
        raise PolicyError(f'unsupported action "{action}"')
    return action


def _decode_rule(raw: object) -> Rule:
    """A rule as Go's json.Unmarshal sees it: missing fields are empty, wrong types fail."""
    if not isinstance(raw, dict):
        raise PolicyError("json: cannot unmarshal a non-object into an egress rule")
    fields = {key: raw.get(key) or "" for key in ("action", "target")}
    for key, value in fields.items():
        if not isinstance(value, str):
            raise PolicyError(f"json: cannot unmarshal a non-string into {key}")
    return Rule(fields["action"], fields["target"])


def _normalized(rule: Rule) -> Rule:
    # `normalizePolicy`: an empty action means deny, an empty target is an error
    # (docs/execd-wire.rst, wire-egress-policy).
    target = rule.target.strip()
    if not target:
        raise PolicyError("egress target cannot be empty")
    return Rule(_normalize_action(rule.action, DENY), target)


def parse_policy(text: str) -> Policy:
    """`ParsePolicy`: empty, `null` and `{}` all mean the default deny policy
    (docs/execd-wire.rst, wire-egress-policy)."""
    text = text.strip()
    if text in ("", "null", "{}"):
        return Policy()
    raw = _decode_json(text)
    if not isinstance(raw, dict):
        raise PolicyError("json: cannot unmarshal a non-object into a network policy")
    egress, default_action = raw.get("egress"), raw.get("defaultAction") or ""
    if egress is not None and not isinstance(egress, list):
        raise PolicyError("json: cannot unmarshal a non-array into egress")
    if not isinstance(default_action, str):
        raise PolicyError("json: cannot unmarshal a non-string into defaultAction")
    rules = None if egress is None else tuple(_normalized(_decode_rule(r)) for r in egress)
    return Policy(_normalize_action(default_action, DENY), rules)


def parse_rules(text: str) -> list[Rule]:
    """A PATCH body: a JSON array of rules, not yet validated
    (docs/execd-wire.rst, wire-egress-patch)."""
    raw = _decode_json(text)
    if not isinstance(raw, list):
        raise PolicyError("json: cannot unmarshal a non-array into a list of egress rules")
    return [_decode_rule(r) for r in raw]


def parse_targets(text: str) -> list[str]:
    """A DELETE body: a JSON array of target strings (docs/execd-wire.rst, wire-egress-delete)."""
    raw = _decode_json(text)
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise PolicyError("json: cannot unmarshal into a list of strings")
    return raw


def patched(current: Policy, patch: list[Rule]) -> Policy:
    """Patch rules first (first occurrence per target wins), then the untouched old rules
    (docs/execd-wire.rst, wire-egress-patch).

    Validation happens after the merge, as in the sidecar, so a bad patch rule is reported as
    an invalid merged policy.
    """
    merged: dict[str, Rule] = {}
    for rule in [*patch, *current.rules]:
        merged.setdefault(rule.target.lower(), rule)
    return Policy(current.default_action, tuple(_normalized(r) for r in merged.values()))


def without_targets(current: Policy, targets: list[str]) -> tuple[Policy, int]:
    """Drop rules whose lowercased target is listed; an emptied list stays `[]`, not null
    (docs/execd-wire.rst, wire-egress-delete)."""
    doomed = {t.strip().lower() for t in targets if t.strip()}
    kept = tuple(r for r in current.rules if r.target.lower() not in doomed)
    return Policy(current.default_action, kept), len(current.rules) - len(kept)
