"""The assets an operator's files are read from and its outputs written to, as Airflow declares
them: the inlets and outlets a Dag scheduled on an asset waits for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.providers.common.compat.sdk import Asset, ObjectStoragePath, XComArg


def rendered_later(value: Any) -> bool:
    """Whether a value is a template or an upstream task's output, known only at run time."""
    if isinstance(value, XComArg):
        return True
    return isinstance(value, str) and any(mark in value for mark in ("{{", "{%", "{#"))


def declared_assets(locations: Iterable[Any]) -> list[Asset]:
    """
    The asset each location names, in order and once each: an :class:`Asset` as it is, an
    ``ObjectStoragePath`` or a URL string as the asset of its URI. A template, an upstream
    task's output, text or bytes to copy in, and a bare path name none.
    """
    assets: list[Asset] = []
    for location in locations:
        asset = _asset_of(location)
        if asset is not None and asset not in assets:
            assets.append(asset)
    return assets


def declared_inputs(files: Mapping[str, Any]) -> list[Asset]:
    """The assets ``files`` are copied in from: text and bytes to write name none."""
    return declared_assets(v for v in files.values() if not isinstance(v, str | bytes))


def storage_path(location: str | Asset | ObjectStoragePath) -> ObjectStoragePath:
    """Where a file is copied to or from: an asset's URI, a URL, or the path given."""
    if isinstance(location, Asset):
        return ObjectStoragePath(location.uri)
    if isinstance(location, str):
        return ObjectStoragePath(location)
    return location


def shown(location: Any) -> str:
    """A destination as a task log names it: an asset by its URI and name."""
    if isinstance(location, Asset):
        return f"{location.uri} (asset {location.name})"
    return str(location)


def _asset_of(location: Any) -> Asset | None:
    if isinstance(location, Asset):
        return location
    if isinstance(location, ObjectStoragePath):
        # Without the connection id an ObjectStoragePath may carry (s3://conn@bucket/key):
        # the asset is the stored object, whichever connection reaches it.
        return Asset(uri=f"{location.protocol}://{location.path}")
    # A template's value is known only when the task runs, and an asset is a fixed name that
    # Airflow records when it parses the Dag.
    if isinstance(location, str) and "://" in location and not rendered_later(location):
        return _asset_of(ObjectStoragePath(location))
    return None


def add_new(declared: list[Any], assets: Iterable[Asset]) -> list[Any]:
    """``declared`` with each of ``assets`` it lacks added at its end."""
    return [*declared, *(asset for asset in assets if asset not in declared)]
