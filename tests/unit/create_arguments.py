"""What a backend hands the SDK's create, the create stopped there before any request."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from opensandbox.config.connection_sync import ConnectionConfigSync

from opensandbox_provider.sandbox import OpenSandboxBackend, _creation


class _Stopped(Exception):
    """Raised in place of the SDK's create once its arguments are kept."""


def sent_by_create(
    monkeypatch: pytest.MonkeyPatch, backend: OpenSandboxBackend, metadata: dict | None = None
) -> dict[str, Any]:
    """The arguments ``backend`` gives the SDK's create for a cold sandbox, its image as
    ``image``."""
    from opensandbox import SandboxSync

    sent: dict[str, Any] = {}

    # resource_requests named, as the SDK's create names it: whether the SDK takes requests is
    # read from that signature when the provider's config module is first imported.
    def create(image: Any, *, resource_requests: Any = None, **arguments: Any) -> None:
        sent.update(arguments, image=image)
        if resource_requests is not None:
            sent["resource_requests"] = resource_requests
        raise _Stopped

    monkeypatch.setattr(SandboxSync, "create", create)
    config = ConnectionConfigSync(domain="h:1", request_timeout=timedelta(seconds=1))
    with pytest.raises(_Stopped):
        _creation.create_cold(backend.creation_template(None).stamped(metadata or {}), config)
    return sent
