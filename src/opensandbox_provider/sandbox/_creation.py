"""
How a backend comes to have a sandbox: a new one made by the server as the creation template
says and waited for until execd answers, or one found again by handle.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider._errors import api_exceptions, as_sandbox_errors
from opensandbox_provider.egress import _policy
from opensandbox_provider.sandbox import _diagnosis, _registry, _resources, _volumes

if TYPE_CHECKING:
    from collections.abc import Callable

    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync

    from opensandbox_provider._metrics import Route
    from opensandbox_provider.sandbox._record import SandboxRecord
    from opensandbox_provider.sandbox._source import SandboxSource
    from opensandbox_provider.sandbox._template import CreationTemplate


def route(drawn: SandboxSource | None) -> Route:
    """The route a sandbox came by, as its creation's metric is named."""
    return "cold" if drawn is None else drawn.route


def create_cold(template: CreationTemplate, config: ConnectionConfigSync) -> SandboxSync:
    """A new sandbox from the server, made as ``template`` says."""
    with as_sandbox_errors("create a sandbox", terminal=True):
        from opensandbox import SandboxSync

        from opensandbox_provider._connection_config import creation_options

        # A snapshot is on the server already: there is no image to pull, and no login to send.
        image = template.pulled_image
        try:
            return SandboxSync.create(
                image and _registry.image_spec(image, template.registry_conn_id),
                snapshot_id=template.snapshot,
                timeout=timedelta(seconds=template.lease),
                ready_timeout=timedelta(seconds=template.ready_timeout),
                env=template.env,
                metadata=dict(template.metadata),
                resource={**template.limits, **template.resources},
                network_policy=template.policy,
                volumes=_volumes.sdk_volumes(template.volumes),
                connection_config=awaiting_the_pod(config, template.ready_timeout),
                # Readiness is polled by wait_until_ready, without the SDK's backoff on the
                # first miss.
                skip_health_check=True,
                **within_limits(creation_options(config, template.requests), template.limits),
            )
        except api_exceptions() as e:
            raise (
                _volumes.explain_refusal(e, template.volumes)
                or _registry.explain_refusal(e, image, template.registry_conn_id)
                or _diagnosis.explain_refusal(
                    e, image=image, registry_conn_id=template.registry_conn_id
                )
                or _policy.explain_refusal(e, template.policy)
            ) from e


def awaiting_the_pod(config: ConnectionConfigSync, ready_timeout: float) -> ConnectionConfigSync:
    """``config`` with a request timeout that lets the create's answer wait ``ready_timeout``.

    On Kubernetes the server answers a create only once the pod has an address, and refuses it
    with the cause it saw (no node can hold the pod, a Pool at its poolMax, a pod that failed,
    its own create timeout) when it cannot. A request timeout shorter than that wait, the
    connection's 30 s by default, would turn each of those into a bare timeout. The config has
    no transport of its own (each sandbox builds one), so the copy shares nothing with it.
    """
    waited = timedelta(seconds=ready_timeout)
    if config.request_timeout >= waited:
        return config
    return config.model_copy(update={"request_timeout": waited})


def within_limits(options: dict[str, Any], limits: dict[str, str]) -> dict[str, Any]:
    """The create's options with no resource request above its limit (see _resources.capped)."""
    if "resource_requests" not in options:
        return options
    return {**options, "resource_requests": _resources.capped(options["resource_requests"], limits)}


def wait_until_ready(
    record: SandboxRecord, *, ready_timeout: float, diagnose: Callable[[], str] = str
) -> float:
    """Ask execd whether it is up until it answers, for ``ready_timeout`` seconds at most;
    return how long that took. ``diagnose`` says why it never did, when the server knows."""
    with as_sandbox_errors(f"reach sandbox {record.sdk.id}", terminal=True):
        waited = record.execd.wait_until_answering(time.monotonic() + ready_timeout)
    if waited is None:
        advice = diagnose() or (
            " Check that the image starts on the OpenSandbox server, or raise ready_timeout."
        )
        raise SandboxTerminalError(
            f"Sandbox {record.sdk.id} did not become ready within {ready_timeout:g}s, so it "
            f"was destroyed.{advice}"
        )
    return waited


def connect(handle: str, *, config: ConnectionConfigSync, ready_timeout: float) -> SandboxSync:
    """The SDK's handle on an existing sandbox, with no health check: the caller polls execd."""
    with as_sandbox_errors(f"reconnect to sandbox {handle}"):
        from opensandbox import SandboxSync

        return SandboxSync.connect(
            handle,
            connection_config=config,
            connect_timeout=timedelta(seconds=ready_timeout),
            skip_health_check=True,
        )
