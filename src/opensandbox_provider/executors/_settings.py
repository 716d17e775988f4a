"""
What a try's sandbox is made of: the ``[opensandbox_executor]`` options, and the task's
``executor_config={"opensandbox": {...}}`` over them, as ``pod_override`` is over
KubernetesExecutor's pod template.
"""

from __future__ import annotations

import importlib
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opensandbox_provider.pool import WarmPool

SECTION = "opensandbox_executor"
EXECUTOR_CONFIG_KEY = "opensandbox"
# What a task may override, each with the type it must have.
_OVERRIDES: dict[str, type | tuple[type, ...]] = {
    "image": str,
    "snapshot": str,
    "cpu": str,
    "memory": str,
    "resources": dict,
    "env": dict,
    "allow_egress_to": (list, tuple),
    "allow_egress_to_cidrs": (list, tuple),
    "warm_pool": str,
}


class ExecutorConfigError(ValueError):
    """A task's ``executor_config`` or the executor's options say something no sandbox can be."""


@dataclass(frozen=True)
class TrySettings:
    """Everything one try's sandbox is created with, before the try's own identity and files."""

    conn_id: str
    image: str | None
    snapshot: str | None
    cpu: str
    memory: str
    lease: float
    ready_timeout: float
    try_timeout: float
    execution_api_server_url: str
    # The scheduler's [core] executor, which the Dag's parse in the sandbox checks tasks against.
    executors: str = ""
    # The module:attribute of a WarmPool to draw each try's sandbox from.
    warm_pool: str | None = None
    resources: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    allow_egress_to: tuple[str, ...] = ()
    allow_egress_to_cidrs: tuple[str, ...] = ()

    def overridden(self, executor_config: Mapping[str, Any] | None) -> TrySettings:
        """These settings with the task's ``executor_config["opensandbox"]`` over them."""
        wanted = (executor_config or {}).get(EXECUTOR_CONFIG_KEY)
        if wanted is None:
            return self
        if not isinstance(wanted, Mapping):
            raise ExecutorConfigError(
                f'executor_config["{EXECUTOR_CONFIG_KEY}"] is a {type(wanted).__name__}; make it '
                f"a dict of any of {sorted(_OVERRIDES)}."
            )
        unknown = sorted(set(wanted) - set(_OVERRIDES))
        if unknown:
            raise ExecutorConfigError(
                f'executor_config["{EXECUTOR_CONFIG_KEY}"] has {unknown}, which the '
                f"OpenSandboxExecutor does not know; use only {sorted(_OVERRIDES)}."
            )
        for name, value in wanted.items():
            if not isinstance(value, _OVERRIDES[name]):
                raise ExecutorConfigError(
                    f'executor_config["{EXECUTOR_CONFIG_KEY}"]["{name}"] is a '
                    f"{type(value).__name__}, which it cannot be; see docs/executor.rst."
                )
        changes: dict[str, Any] = dict(wanted)
        if "image" in wanted:
            # A task that names an image means that image, not the configured snapshot.
            changes.setdefault("snapshot", None)
        if "snapshot" in wanted:
            changes.setdefault("image", None)
        for name in ("allow_egress_to", "allow_egress_to_cidrs"):
            if name in changes:
                changes[name] = tuple(str(value) for value in changes[name])
        if "env" in changes:
            changes["env"] = {str(k): str(v) for k, v in changes["env"].items()}
        return replace(self, **changes)

    def egress(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """
        The hosts and address ranges the sandbox may reach: the execution API's host, which the
        Task SDK reports to, and whatever the task added; nothing else.
        """
        host = urlsplit(self.execution_api_server_url).hostname or ""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return (host, *self.allow_egress_to), self.allow_egress_to_cidrs
        return self.allow_egress_to, (f"{address}/32", *self.allow_egress_to_cidrs)


def configured(conf: Any) -> TrySettings:
    """The executor's settings from its ``[opensandbox_executor]`` options (``conf`` is an
    executor's ``ExecutorConf`` or Airflow's ``conf``)."""
    from airflow.executors.base_executor import get_execution_api_server_url

    def option(name: str, default: str) -> str:
        return (conf.get(SECTION, name, fallback=default) or default).strip()

    url = option("execution_api_server_url", "") or get_execution_api_server_url()
    if not urlsplit(url).hostname:
        raise ExecutorConfigError(
            f"[{SECTION}] execution_api_server_url is {url!r}, which names no host; set it to "
            "the address the sandboxes reach the api-server's execution API at, such as "
            "http://airflow-api.internal:8080/execution/."
        )
    image, snapshot = option("image", ""), option("snapshot", "")
    if not image and not snapshot:
        raise ExecutorConfigError(
            f"Set [{SECTION}] image (AIRFLOW__{SECTION.upper()}__IMAGE) to an image holding "
            "apache-airflow-core and apache-airflow-task-sdk at the scheduler's versions, or "
            f"[{SECTION}] snapshot to a snapshot holding them: the OpenSandboxExecutor runs each "
            "try with the Task SDK inside its sandbox."
        )
    return TrySettings(
        conn_id=option("opensandbox_conn_id", "opensandbox_default"),
        image=image or None,
        snapshot=snapshot or None,
        cpu=option("cpu", "1"),
        memory=option("memory", "2Gi"),
        lease=float(option("sandbox_timeout", "600")),
        ready_timeout=float(option("ready_timeout", "120")),
        try_timeout=float(option("try_timeout", "86400")),
        execution_api_server_url=url,
        executors=conf.get("core", "executor", fallback="") or "",
        warm_pool=option("warm_pool", "") or None,
    )


def warm_pool(reference: str | None) -> WarmPool | None:
    """The WarmPool ``module:attribute`` names, as its keeper names it; ``None`` for none."""
    from opensandbox_provider.pool import WarmPool

    if not reference:
        return None
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name) if attribute else None
    except ImportError as e:
        raise ExecutorConfigError(
            f"[{SECTION}] warm_pool is {reference!r}, but {module_name} cannot be imported "
            f"({e}): put the module on the scheduler's and the api-server's PYTHONPATH (the "
            "Dags folder is not on it)."
        ) from e
    pool = getattr(module, attribute, None)
    if not isinstance(pool, WarmPool):
        raise ExecutorConfigError(
            f"[{SECTION}] warm_pool is {reference!r}, which names no WarmPool: name it as "
            "module:attribute, as its keeper is named (my_pools:AIRFLOW_TRIES), in a module the "
            "scheduler can import."
        )
    return pool
