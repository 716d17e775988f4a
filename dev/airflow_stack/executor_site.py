"""A local Airflow with the OpenSandboxExecutor beside its default executor, as ``make demo``
and tests/airflow_path/test_executor.py run it.

A try's sandbox reaches the execution API by the stack resolver's allowed name, which points at
the Docker bridge's address, and its egress allows that name alone (docs/executor.rst, "How the
API server must be reachable"): so the api-server listens on the Docker bridge, or, on the
celery topology, whose api-server listens on a bridge of its own, a forward does
(:mod:`dev.airflow_stack.celery_topology`).
"""

from __future__ import annotations

from dataclasses import replace

from dev.airflow_stack.home import AirflowSite
from dev.stack import images, task_sdk_image
from dev.stack.engine import BRIDGE_IP
from dev.stack.resolver import ALLOWED_NAME
from dev.stack.state import ServerInfo

EXECUTOR = "opensandbox_provider.executors.OpenSandboxExecutor"


def executor_settings(
    site: AirflowSite, server: ServerInfo, *, conn_id: str, default_executor: str
) -> dict[str, str]:
    """The executor's options, beside ``default_executor``: each try made on ``server``,
    through the connection ``conn_id``, from the stack's Task SDK image, and reporting to the
    api-server of ``site`` by the allowed name."""
    if images.image_id(task_sdk_image.TAG) is None:
        raise RuntimeError(f"The stack has no {task_sdk_image.TAG}; `make stack-up` builds it.")
    return {
        **server.airflow_connection_env(conn_id, use_server_proxy=True),
        "AIRFLOW__CORE__EXECUTOR": f"{default_executor},{EXECUTOR}",
        "AIRFLOW__OPENSANDBOX_EXECUTOR__OPENSANDBOX_CONN_ID": conn_id,
        "AIRFLOW__OPENSANDBOX_EXECUTOR__IMAGE": task_sdk_image.TAG,
        "AIRFLOW__OPENSANDBOX_EXECUTOR__EXECUTION_API_SERVER_URL": (
            f"http://{ALLOWED_NAME}:{site.port}/execution/"
        ),
    }


def with_executor(site: AirflowSite, server: ServerInfo, *, conn_id: str) -> AirflowSite:
    """The local ``site`` with the executor beside LocalExecutor and its api-server on the
    Docker bridge."""
    settings = executor_settings(site, server, conn_id=conn_id, default_executor="LocalExecutor")
    return replace(site, host=BRIDGE_IP, settings={**site.settings, **settings})
