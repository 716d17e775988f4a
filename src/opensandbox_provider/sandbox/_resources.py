"""
What a sandbox is given to run on, as a Kubernetes container states it: limits and requests.

The backend's ``cpu`` and ``memory`` are limits; ``resources`` adds any other limit the server
passes on (a GPU among them), and ``cpu_request`` and ``memory_request`` ask a scheduler for
less than the limits. Each is checked for form when the Dag is parsed, so that a quantity the
cluster would refuse fails there rather than in a task's creation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

# A Kubernetes quantity: a number and a binary or decimal suffix, or an exponent. Signs are
# left out: no resource is negative.
_QUANTITY = re.compile(r"(?P<number>\d+(\.\d*)?|\.\d+)(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE]\d+)?")
_SCALE = {
    **{f"{p}i": Decimal(1024) ** (i + 1) for i, p in enumerate("KMGTPE")},
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    **{p: Decimal(1000) ** (i + 1) for i, p in enumerate("kMGTPE")},
}
# A resource's name as Kubernetes takes it: a name, optionally behind a DNS-subdomain prefix
# (``nvidia.com/gpu``); the server's own portable ``gpu`` is a bare name.
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MAX_PREFIX = 253
# The server's portable GPU key, which its Docker runtime also takes as "all" GPUs.
GPU = "gpu"
# What the backend's own arguments set; ``resources`` names everything else.
_OWN = ("cpu", "memory")


def quantity(value: Any, label: str) -> Decimal:
    """``value``'s amount, refusing anything but a Kubernetes quantity."""
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(
            f"{label} must be a Kubernetes quantity such as '500m', '2', '512Mi' or '1Gi', got "
            f"{value!r}."
        )
    suffix = match["suffix"] or ""
    if suffix[:1] in ("e", "E"):
        return Decimal(match["number"]) * Decimal(10) ** int(suffix[1:])
    return Decimal(match["number"]) * _SCALE[suffix]


def extra_limits(resources: Mapping[str, str] | None) -> dict[str, str]:
    """``resources`` as the server takes them, each name and amount checked for form."""
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise ValueError(
            f"resources must map a resource's name to its limit, such as "
            f"{{'nvidia.com/gpu': '1'}}, got {resources!r}."
        )
    for name, value in resources.items():
        _check_name(name)
        if name in _OWN:
            raise ValueError(
                f"resources sets {name!r}, which the {name} argument sets: give {name}={value!r} "
                "instead, and keep resources for every other resource."
            )
        if name == GPU and value == "all":
            continue
        amount = quantity(value, f"The limit of {name!r}")
        # Kubernetes counts an extended resource in whole units; only its own kinds split.
        if "/" in name and amount != amount.to_integral_value():
            raise ValueError(
                f"The limit of {name!r} is {value!r}; an extended resource is counted in whole "
                "units, such as '1'."
            )
    return dict(resources)


def requests(
    *, cpu: str, memory: str, cpu_request: str | None, memory_request: str | None
) -> dict[str, str]:
    """The requests given beside the limits, each at most its limit, as Kubernetes demands."""
    given = {}
    for key, request, limit in (("cpu", cpu_request, cpu), ("memory", memory_request, memory)):
        if request is None:
            continue
        label = f"{key}_request"
        if quantity(request, label) > quantity(limit, key):
            raise ValueError(
                f"{label} is {request!r}, above the {key} limit {limit!r}; Kubernetes refuses a "
                f"request above its limit. Lower {label} or raise {key}."
            )
        given[key] = request
    return given


def capped(requests: Mapping[str, str], limits: Mapping[str, str]) -> dict[str, str]:
    """``requests`` with each above its limit lowered to it.

    A connection's requests are defaults for every sandbox made through it; a task that asks
    for a smaller limit gets a request of its limit, rather than a pod Kubernetes refuses,
    which the server would wait on until its create timeout.
    """
    return {
        key: limits[key]
        if key in limits and quantity(request, f"{key}_request") > quantity(limits[key], key)
        else request
        for key, request in requests.items()
    }


def _check_name(name: Any) -> None:
    prefix, _, base = name.rpartition("/") if isinstance(name, str) else ("", "", "")
    if (
        not _NAME.fullmatch(base)
        or (prefix and (len(prefix) > _MAX_PREFIX or not _PREFIX.fullmatch(prefix)))
        or name.startswith("/")
    ):
        raise ValueError(
            f"{name!r} is not a resource name: give a name such as 'ephemeral-storage', or a "
            "domain and a name, such as 'nvidia.com/gpu'."
        )
