"""What a warm pool is: a name, a size, where its state lives, what its sandboxes are made of."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from opensandbox_provider import _tags
from opensandbox_provider._deployment import KEY as DEPLOYMENT_KEY
from opensandbox_provider._deployment import deployment_id
from opensandbox_provider.egress import _policy
from opensandbox_provider.pool import _draw
from opensandbox_provider.sandbox import _arguments, _resources, _volumes

if TYPE_CHECKING:
    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.models.sandboxes import NetworkPolicy
    from opensandbox.pool_types import PoolStateStore

    from opensandbox_provider._metrics import Route
    from opensandbox_provider.sandbox._lifecycle import Lifecycle
    from opensandbox_provider.sandbox._template import CreationTemplate

POOL_KEY = "airflow-pool"
"""The metadata key naming the pool a sandbox was warmed for."""
FINGERPRINT_KEY = "airflow-pool-fingerprint"
"""The metadata key holding the fingerprint of the creation arguments it was warmed with."""

# A pool's name is a metadata value and a part of its Redis keys: a label value, with room
# left for the suffix of a sandbox's name.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")
# The random part of an idle sandbox's name, in hex digits.
_IDLE_SUFFIX = 12
_IDLE_NAME_SUFFIX = re.compile(f"[0-9a-f]{{{_IDLE_SUFFIX}}}")

# Arguments added after pools were in use: counted in a fingerprint only when set.
_UNSET_LEFT_OUT = ("resources", "requests", "registry_conn_id")

Fallback = Literal["cold", "fail"]
_FALLBACKS = ("cold", "fail")


@dataclass(frozen=True)
class CreationArguments:
    """
    Everything a sandbox is created with that a task can tell apart once it runs: a sandbox
    made with other arguments is another kind of sandbox, and is never served for these.
    """

    image: str | None
    snapshot: str | None
    cpu: str
    memory: str
    env: Mapping[str, str]
    # Which connection's login the image is pulled with, never the login itself.
    registry_conn_id: str | None
    # The spec's network fields alone; made into the policy the server is sent only when
    # compared, so that defining a pool in a Dag file imports no SDK module.
    network: SandboxSpec | None
    volumes: tuple[_volumes.Mount, ...]
    # Limits beside cpu and memory, and requests below the limits.
    resources: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, str] = field(default_factory=dict)
    # The names in ``env`` whose values are secrets: compared as every other value is, but
    # left out of the fingerprint. Which names they are does not make another sandbox.
    private: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def of(
        cls,
        *,
        image: str,
        snapshot: str | None,
        cpu: str,
        memory: str,
        spec: SandboxSpec | None,
        volumes: Sequence[_volumes.Mount],
        resources: Mapping[str, str] | None = None,
        requests: Mapping[str, str] | None = None,
        registry_conn_id: str | None = None,
        private_env: Mapping[str, str] | None = None,
    ) -> CreationArguments:
        """
        The arguments a backend with these settings creates a sandbox for ``spec`` with, its
        environment holding ``private_env`` too.
        """
        private = dict(private_env or {})
        if private:
            if spec is None:
                raise ValueError(
                    "private_env is added to the spec's environment, and there is no spec: "
                    "give the pool a spec, such as SandboxSpec(), or drop private_env."
                )
            spec = replace(spec, env={**(spec.env or {}), **private})
        return cls(
            # A snapshot replaces the image, so the image a backend also names does not count.
            image=None if snapshot else image,
            snapshot=snapshot,
            cpu=cpu,
            memory=memory,
            env=_arguments.environment(spec) or {},
            network=None if spec is None else _network(spec),
            volumes=tuple(volumes),
            resources=dict(resources or {}),
            requests=dict(requests or {}),
            # Nothing is pulled for a snapshot, so no login makes another sandbox.
            registry_conn_id=None if snapshot else registry_conn_id,
            private=frozenset(private),
        )

    @classmethod
    def of_template(cls, template: CreationTemplate) -> CreationArguments:
        """What a sandbox made as ``template`` says is made with, as a pool's definition says it."""
        return cls.of(
            image=template.image,
            snapshot=template.snapshot,
            cpu=template.cpu,
            memory=template.memory,
            spec=template.spec,
            volumes=template.volumes,
            resources=template.resources,
            requests=template.requests,
            registry_conn_id=template.registry_conn_id,
        )

    def policy(self) -> NetworkPolicy | None:
        """The network policy a sandbox is created with, as the backend maps the spec."""
        return _policy.network_policy(self.network)

    def canonical(self) -> dict[str, Any]:
        """The arguments as JSON values, in one order, as the server is sent them."""
        volumes = _volumes.sdk_volumes(self.volumes) or []
        return {
            "image": self.image,
            "snapshot": self.snapshot,
            "cpu": self.cpu,
            "memory": self.memory,
            "env": dict(sorted(self.env.items())),
            "network": _dumped(self.policy()),
            "volumes": [_dumped(volume) for volume in volumes],
            "resources": dict(sorted(self.resources.items())),
            "requests": dict(sorted(self.requests.items())),
            "registry_conn_id": self.registry_conn_id,
        }

    def fingerprint(self) -> str:
        """
        A short hash of the arguments, a valid label value, stamped on every warm sandbox.

        The private values are left out: the fingerprint is metadata every holder of the
        server's API key reads, and a hash over a short secret can be guessed offline. Their
        names stay, so a definition that adds or drops one still makes another fingerprint; a
        definition without any has the fingerprint it always had.
        """
        canonical = self.canonical()
        # Left out when unset, so that a definition without them has the fingerprint it had
        # before they existed, and its warm sandboxes still serve.
        for name in _UNSET_LEFT_OUT:
            if not canonical[name]:
                del canonical[name]
        if self.private:
            canonical["env"] = {
                name: value for name, value in canonical["env"].items() if name not in self.private
            }
            canonical["private_env"] = sorted(self.private)
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def differences(self, other: CreationArguments) -> list[str]:
        """What differs from ``other``, in words for the task log; environment values unsaid."""
        mine, theirs = self.canonical(), other.canonical()
        # Environment values may be secrets: only the names are logged.
        return [
            f"env (names {sorted(value)} against {sorted(theirs[name])})"
            if name == "env"
            else f"{name} ({value!r} against {theirs[name]!r})"
            for name, value in mine.items()
            if value != theirs[name]
        ]


@dataclass(frozen=True)
class WarmPool:
    """
    A named pool of ready sandboxes that every worker draws from instead of creating one.

    A keeper (``python -m opensandbox_provider.pool keep``) holds ``size`` idle sandboxes
    made with these arguments; a backend given the pool takes one of them for a task and
    destroys it after the task, as it would a sandbox it created. Its creation arguments
    must equal the backend's and the task's spec; see :doc:`/pools`.

    :param name: The pool's name, shared by its keeper and every worker: lowercase letters,
        digits and ``-``, at most 40 characters.
    :param size: How many idle sandboxes the keeper holds ready.
    :param store: Where the pool's state lives, shared by every worker: a Redis URL
        (``redis://host:6379/0``) or the id of an Airflow connection to Redis.
    :param image: The image each sandbox runs, as the backend's ``image``.
    :param snapshot: A snapshot to start each sandbox from instead of ``image``.
    :param cpu: The CPU limit of each sandbox, as the backend's ``cpu``.
    :param memory: The memory limit of each sandbox, as the backend's ``memory``.
    :param resources: Other resource limits of each sandbox, as the backend's ``resources``.
    :param cpu_request: As the backend's ``cpu_request``.
    :param memory_request: As the backend's ``memory_request``.
    :param registry_conn_id: The ``docker`` connection whose login the keeper pulls ``image``
        with, as the backend's ``registry_conn_id``. The definition, and so the fingerprint
        every warm sandbox carries, holds the connection's id, never its login.
    :param spec: The environment and network policy each sandbox is made with, as the task's
        ``SandboxSpec`` gives them. The default, ``SandboxSpec()``, denies all egress, as an
        operator's default spec does; ``None`` is what a backend creates for no spec at all.
        Its ``owner`` must be unset: that is the task's, given when it draws a sandbox.
    :param volumes: Data mounted into each sandbox, as the backend's ``volumes``.
    :param opensandbox_conn_id: The connection naming the server the keeper creates on; a
        backend draws from the pool only through a connection of the same id.
    :param idle_lease: Seconds an idle sandbox lives on the server if nobody draws it; the
        keeper replaces one before then, and a pool whose keeper stopped empties by itself.
    :param when_empty: ``"cold"`` to create a sandbox as without a pool when none is idle
        (or the store cannot be reached), ``"fail"`` to fail the task.
    :param on_mismatch: ``"cold"`` to create a sandbox as without a pool when the backend's
        arguments or the task's spec differ from the pool's, ``"fail"`` to fail the task.
    :param private_env: Environment variables added to ``spec.env`` that are secrets, as an
        operator's ``private_env`` is: a task draws only if its environment holds the same
        values, but no sandbox's metadata carries a digest of them (see :doc:`/pools`).
    """

    name: str
    size: int
    store: str | PoolStateStore = field(repr=False)
    image: str = "python:3.12-slim"
    snapshot: str | None = None
    cpu: str = "1"
    memory: str = "2Gi"
    resources: Mapping[str, str] = field(default_factory=dict)
    cpu_request: str | None = None
    memory_request: str | None = None
    registry_conn_id: str | None = None
    spec: SandboxSpec | None = field(default_factory=SandboxSpec)
    volumes: Sequence[_volumes.Mount] = ()
    opensandbox_conn_id: str | None = "opensandbox_default"
    idle_lease: float = 900.0
    when_empty: Fallback = "cold"
    on_mismatch: Fallback = "cold"
    private_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    creation: CreationArguments = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(
                f"A warm pool's name must be lowercase letters, digits and '-', starting and "
                f"ending with a letter or digit, at most 40 characters; got {self.name!r}."
            )
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 0:
            raise ValueError(f"size must be a whole number of sandboxes, got {self.size!r}.")
        if isinstance(self.store, str) and not self.store.strip():
            raise ValueError(
                "store must name where the pool's state lives: a Redis URL such as "
                "'redis://localhost:6379/0', or the id of an Airflow connection to Redis."
            )
        _arguments.check_backend(
            image=self.image,
            cpu=self.cpu,
            memory=self.memory,
            lease=self.idle_lease,
            lease_name="idle_lease",
            ready_timeout=1.0,
        )
        for label in ("when_empty", "on_mismatch"):
            if getattr(self, label) not in _FALLBACKS:
                raise ValueError(f"{label} must be 'cold' or 'fail', got {getattr(self, label)!r}.")
        if self.spec is not None and self.spec.owner is not None:
            raise ValueError(
                "A warm pool's spec cannot have an owner: its sandboxes are made before any "
                "task asks for one. The task's spec gives the owner when it draws a sandbox."
            )
        object.__setattr__(self, "snapshot", _arguments.snapshot_id(self.snapshot))
        object.__setattr__(self, "volumes", _volumes.checked(self.volumes))
        object.__setattr__(
            self,
            "creation",
            CreationArguments.of(
                image=self.image,
                snapshot=self.snapshot,
                cpu=self.cpu,
                memory=self.memory,
                spec=self.spec,
                volumes=self.volumes,
                resources=_resources.extra_limits(self.resources),
                requests=_resources.requests(
                    cpu=self.cpu,
                    memory=self.memory,
                    cpu_request=self.cpu_request,
                    memory_request=self.memory_request,
                ),
                registry_conn_id=self.registry_conn_id,
                private_env=self.private_env,
            ),
        )

    @property
    def idle_name_prefix(self) -> str:
        """What the name of each of its idle sandboxes starts with, before a draw renames it."""
        return f"airflow-pool-{self.name}-"

    def is_idle_name(self, name: str | None) -> bool:
        """Whether ``name`` is one this pool warms a sandbox with."""
        suffix = (name or "").removeprefix(self.idle_name_prefix)
        return suffix != name and _IDLE_NAME_SUFFIX.fullmatch(suffix) is not None

    @property
    def route(self) -> Route:
        return "warm_pool"

    def check_backend(self, *, snapshot: str | None, has_volumes: bool) -> None:
        """Nothing to refuse when the Dag is parsed: each draw compares the arguments."""

    def take(
        self, template: CreationTemplate, *, lifecycle: Lifecycle, config: ConnectionConfigSync
    ) -> SandboxSync | None:
        """
        An idle sandbox of the pool, made the task's, when the pool's arguments are the
        template's (see :mod:`._draw`); ``None`` when the backend is to create one without it.
        """
        handover = _draw.Handover(
            lifecycle=lifecycle,
            config=config,
            metadata=dict(template.metadata),
            lease=template.lease,
            connect_timeout=template.ready_timeout,
        )
        wanted = CreationArguments.of_template(template)
        return _draw.draw(self, wanted=wanted, conn_id=template.conn_id, handover=handover)

    def origin(self, template: CreationTemplate) -> tuple[str, str]:
        return f"Took from warm pool {self.name}", template.made_from

    def unenforced(self, error: SandboxTerminalError) -> None:
        """Nothing to add: a warm sandbox is made with the policy, as a created one is."""
        return None

    def __deepcopy__(self, memo: dict[int, Any]) -> WarmPool:
        # Airflow deep-copies a task and the backend it holds; a pool is a frozen value, and
        # a store object given for it (a lock inside) is shared, never copied.
        return self

    def idle_metadata(self) -> dict[str, str]:
        """
        The metadata a sandbox is warmed with: whose it is (the keeper's deployment, which only
        a draw of the same deployment takes), and what it was made with.
        """
        return {
            **_tags.CREATED_BY,
            DEPLOYMENT_KEY: deployment_id(),
            "name": f"{self.idle_name_prefix}{uuid.uuid4().hex[:_IDLE_SUFFIX]}",
            POOL_KEY: self.name,
            FINGERPRINT_KEY: self.creation.fingerprint(),
        }


def _network(spec: SandboxSpec) -> SandboxSpec:
    """The spec's network fields alone, which are all of it the policy is made from."""
    return SandboxSpec(
        block_network=spec.block_network,
        allow_egress_to=spec.allow_egress_to,
        allow_egress_to_cidrs=spec.allow_egress_to_cidrs,
    )


def _dumped(model: Any) -> Any:
    if model is None:
        return None
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
