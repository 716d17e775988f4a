"""
What the operator and the decorator tell OpenLineage: stored inputs, outputs, and the sandbox.

The datasets are the OpenLineage provider's own conversions; a real Dag run's events, as its
file transport writes them, are read in tests/airflow_path (test_operator_features.py).
"""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import Asset, ObjectStoragePath

# The openlineage provider is the dev group's, optional for users; the compatibility
# matrix's environments, which hold only what the package declares, have none.
pytest.importorskip(
    "airflow.providers.openlineage", reason="the openlineage provider is not installed here"
)

from airflow.providers.openlineage.extractors.manager import ExtractorManager  # noqa: E402

from opensandbox_provider.decorators.opensandbox import opensandbox_task  # noqa: E402
from opensandbox_provider.operators._lineage import FACET  # noqa: E402
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator  # noqa: E402
from opensandbox_provider.pool import ServerPool  # noqa: E402
from tests.unit.operators.test_opensandbox_templating import in_a_dag, rendered  # noqa: E402


def names(datasets) -> list[tuple[str, str]]:
    return [(dataset.namespace, dataset.name) for dataset in datasets]


def operator(**arguments) -> OpenSandboxOperator:
    return OpenSandboxOperator(
        task_id="t",
        command="true",
        files={
            "in.csv": ObjectStoragePath("file:///data/in.csv"),
            "lookup.csv": Asset(uri="s3://lookups/l.csv", name="lookup"),
            "script.py": "print(1)",
            "blob.bin": b"\x00",
        },
        outputs={"out.csv": "file:///data/out.csv"},
        **arguments,
    )


def test_stored_files_are_inputs_and_outputs_outputs_before_any_sandbox() -> None:
    lineage = operator().get_openlineage_facets_on_start()
    # A local file through common-io's converter; a store with no converter installed by the
    # URI's parts, as the OpenLineage provider converts an inlet it has no converter for.
    assert names(lineage.inputs) == [("file", "/data/in.csv"), ("s3://lookups", "l.csv")]
    assert names(lineage.outputs) == [("file", "/data/out.csv")]
    assert lineage.run_facets == {}


def test_the_datasets_are_the_ones_the_openlineage_provider_makes_of_the_same_inlets() -> None:
    made = operator()
    lineage = made.get_openlineage_facets_on_start()
    assert (
        names(lineage.inputs)[0]
        == names([ExtractorManager.convert_to_ol_dataset(made.inlets[0])])[0]
    )
    assert names(lineage.outputs) == names(
        [ExtractorManager.convert_to_ol_dataset(asset) for asset in made.outlets]
    )


def test_the_end_names_the_sandbox_and_its_image() -> None:
    made = operator(image="python:3.13-slim")
    made._sandbox_id = "sb-1"
    lineage = made.get_openlineage_facets_on_complete(None)
    facet = lineage.run_facets[FACET]
    assert (facet.sandboxId, facet.image, facet.snapshot) == ("sb-1", "python:3.13-slim", None)
    assert names(lineage.outputs) == [("file", "/data/out.csv")]


def test_a_sandbox_from_a_snapshot_or_a_server_pool_names_no_image() -> None:
    from_snapshot = operator(snapshot="snap-1")
    from_snapshot._sandbox_id = "sb-1"
    facet = from_snapshot.get_openlineage_facets_on_complete(None).run_facets[FACET]
    assert (facet.image, facet.snapshot) == (None, "snap-1")
    from_pool = operator(warm_pool=ServerPool("pods"))
    from_pool._sandbox_id = "sb-2"
    assert from_pool.get_openlineage_facets_on_complete(None).run_facets[FACET].image is None


def test_a_failed_task_reports_its_inputs_and_sandbox_but_no_output() -> None:
    made = operator()
    made._sandbox_id = "sb-1"
    lineage = made.get_openlineage_facets_on_failure(None)
    assert names(lineage.inputs) == [("file", "/data/in.csv"), ("s3://lookups", "l.csv")]
    assert lineage.outputs == []
    assert lineage.run_facets[FACET].sandboxId == "sb-1"


def test_a_failure_before_any_sandbox_reports_no_facet() -> None:
    assert operator().get_openlineage_facets_on_failure(None).run_facets == {}


def test_a_templated_destination_is_reported_as_rendered() -> None:
    made = rendered(in_a_dag(command="true", outputs={"r.csv": "file:///data/{{ ds }}/r.csv"}))
    lineage = made.get_openlineage_facets_on_complete(None)
    assert names(lineage.outputs) == [("file", "/data/2026-01-02/r.csv")]


def test_the_decorator_reports_its_stored_files_but_not_its_own_script() -> None:
    @opensandbox_task(files={"in.csv": ObjectStoragePath("file:///data/in.csv")})
    def count() -> int:
        return 1

    from airflow.sdk import dag

    @dag(schedule=None)
    def holder() -> None:
        count()

    task = holder().task_dict["count"]
    task.files = {**task.files, "/srv/script.py": "print(1)"}
    lineage = task.get_openlineage_facets_on_start()
    assert names(lineage.inputs) == [("file", "/data/in.csv")]
    assert lineage.outputs == []
