"""
Where this provider reaches into another package's internals, and what it says when one moved.

A few things the provider needs are private to the SDK, httpx or httpcore: the SSL context the
SDK shares between its transports, httpcore's network backend, the bytes its parser read past
a response's headers, the SDK's exception constructors. Each reach checks the shape it
expects; one that finds another shape carries on with what it loses named here, once per
process, with the installed version, so that the loss is seen in the task log rather than
discovered as a slower or unbounded call. A unit test per reach pins that the versions this
provider pins have the shape.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading

log = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution``, or a word saying it could not be read."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def warn_moved(distribution: str, reach: str, lost: str) -> None:
    """
    Log, once per process for each ``reach``, that ``distribution`` no longer has the shape
    ``reach`` names, and ``lost``: what goes without it, as a sentence.
    """
    with _lock:
        if (distribution, reach) in _warned:
            return
        _warned.add((distribution, reach))
    log.warning(
        "%s %s does not have %s, which airflow-provider-opensandbox reaches for. %s Install the "
        "version of %s this provider pins to get it back.",
        distribution,
        installed_version(distribution),
        reach,
        lost,
        distribution,
    )
