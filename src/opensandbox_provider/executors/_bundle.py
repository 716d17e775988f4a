"""The Dag file a try needs, read from the scheduler's own copy of the Dag's bundle."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.executors.workloads import ExecuteTask

# A Dag file larger than this is refused rather than uploaded to every try's sandbox.
MAX_DAG_FILE_BYTES = 16 * 1024 * 1024


def dag_file_source(workload: ExecuteTask) -> bytes:
    """
    The bytes of the try's Dag file, at the bundle version the scheduler resolved for its run.
    Only that file is uploaded: a Dag that imports other modules of its bundle needs them in the
    sandbox's image (docs/executor.rst).
    """
    from airflow.dag_processing.bundles.manager import DagBundlesManager

    info = workload.bundle_info
    bundle = DagBundlesManager().get_bundle(name=info.name, version=info.version)
    bundle.initialize()
    path = Path(bundle.path) / workload.dag_rel_path
    size = path.stat().st_size
    if size > MAX_DAG_FILE_BYTES:
        raise ValueError(
            f"The Dag file {path} is {size} bytes, more than the {MAX_DAG_FILE_BYTES} the "
            "OpenSandboxExecutor uploads to a try's sandbox; split it, or bake it into the image."
        )
    return path.read_bytes()
