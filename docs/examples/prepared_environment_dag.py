"""A set-up made once as a snapshot, and a sandbox started from it under a spec of its own:
docs/prepared-environments.rst, "Snapshots as prepared environments"."""

# [START prepared_environment]
from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task

from opensandbox_provider.sandbox import OpenSandboxBackend, prepare_snapshot

SET_UP = ["python -m venv /opt/env", "/opt/env/bin/pip install pandas==2.2.3"]


@task
def prepare() -> str:
    return prepare_snapshot(OpenSandboxBackend(), SET_UP)


@task
def analyse(snapshot: str) -> None:
    backend = OpenSandboxBackend(snapshot=snapshot)
    handle = backend.create(spec=SandboxSpec())  # deny-all, whatever the set-up had
    try:
        backend.run_command(handle, "/opt/env/bin/python -V", timeout=60, max_output_bytes=4096)
    finally:
        backend.destroy(handle)


@dag(schedule=None)
def prepared():
    analyse(prepare())


prepared()
# [END prepared_environment]
