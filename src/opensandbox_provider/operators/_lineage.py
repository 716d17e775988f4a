"""
What the operator tells OpenLineage: the locations ``files`` are copied in from as inputs, the
destinations of ``outputs`` as outputs, and the sandbox the command ran in as a run facet.

Imported only by the methods the OpenLineage provider calls, so that the provider and its
client stay optional.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.providers.openlineage.extractors.manager import ExtractorManager
from attrs import define
from openlineage.client.facet_v2 import RunFacet

from opensandbox_provider.operators._assets import declared_assets, declared_inputs

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Asset
    from openlineage.client.event_v2 import Dataset

# The run facet's key in an event's ``run.facets``.
FACET = "opensandbox_sandbox"


@define
class OpenSandboxSandboxRunFacet(RunFacet):
    """The sandbox a task's command ran in: its id, and what it was started from."""

    sandboxId: str  # noqa: N815  (OpenLineage's fields are camelCase)
    image: str | None
    snapshot: str | None


def lineage(
    files: Mapping[str, Any],
    outputs: Mapping[str, Any] | None,
    *,
    sandbox: str | None = None,
    image: str | None = None,
    snapshot: str | None = None,
) -> OperatorLineage:
    """
    The task's inputs and outputs as datasets, and once a sandbox exists its facet. ``outputs``
    is ``None`` when none were written (the task failed before copying them).
    """
    run_facets: dict[str, Any] = {}
    if sandbox is not None:
        run_facets[FACET] = OpenSandboxSandboxRunFacet(
            sandboxId=sandbox, image=image, snapshot=snapshot
        )
    return OperatorLineage(
        inputs=_datasets(declared_inputs(files)),
        outputs=[] if outputs is None else _datasets(declared_assets(outputs.values())),
        run_facets=run_facets,
    )


def _datasets(assets: Iterable[Asset]) -> list[Dataset]:
    """
    Each asset as the OpenLineage provider turns a task's inlets and outlets into datasets:
    through the converter a provider registers for its scheme, or else by the URI's parts.
    """
    converted = (
        ExtractorManager.convert_to_ol_dataset(asset)
        or ExtractorManager.convert_to_ol_dataset_from_object_storage_uri(asset.uri)
        for asset in assets
    )
    return [dataset for dataset in converted if dataset is not None]
