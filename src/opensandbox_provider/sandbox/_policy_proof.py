"""
Holding a sandbox to the network policy proven at its create: the re-check after each command
and after a resume, and what happens to a sandbox that fails it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from opensandbox_provider.egress import _policy

if TYPE_CHECKING:
    from collections.abc import Callable

    from opensandbox_provider.sandbox._record import SandboxRecord

log = logging.getLogger(__name__)


def recheck(record: SandboxRecord, *, after: str, destroy: Callable[[str], None]) -> None:
    """
    Destroy the sandbox with ``destroy``, raising :class:`~.egress._policy.PolicyUnproven`,
    if its sidecar no longer enforces the policy proven at create or cannot be shown to;
    ``after`` says when it was found, such as "after it was resumed".
    """
    # The guest shares the sidecar's network namespace, and a server configured without
    # an egress token lets it rewrite the policy; so does anyone holding the sandbox's
    # endpoint. One small read after each command catches it before the next one runs.
    if record.proven_policy is None:
        return
    problem = _policy.unenforced(record.http, record.proven_policy)
    if problem is None:
        return
    sandbox = record.sdk.id
    found = (
        "no longer enforces the network policy it was created with"
        if problem.answered
        else "could not be shown to enforce the network policy it was created with"
    )
    log.warning("Sandbox %s %s %s; destroying it.", sandbox, found, after)
    destroy(sandbox)
    raise _policy.PolicyUnproven(
        f"Sandbox {sandbox} {found}, so it was destroyed {after}: {problem.why}"
    )
