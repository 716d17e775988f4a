"""A local Airflow with the OpenSandboxExecutor beside its default executor, and the keeper of
its warm pool, as ``make demo``, ``make bench`` and tests/airflow_path/test_executor.py run it.

A try's sandbox reaches the execution API by the stack resolver's allowed name, which points at
the bridge its sandboxes reach this host by (the Docker bridge; on the local cluster, the pod
bridge's gateway), and its egress allows that name alone (docs/executor.rst, "How the API server
must be reachable"): so the api-server listens on that bridge, or, on the celery topology, whose
api-server listens on a bridge of its own, a forward does
(:mod:`dev.airflow_stack.celery_topology`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from dev.airflow_stack import components, pool_keeper
from dev.airflow_stack.home import AirflowSite
from dev.stack import images, task_sdk_image
from dev.stack.resolver import ALLOWED_NAME
from dev.stack.state import ServerInfo

EXECUTOR = "opensandbox_provider.executors.OpenSandboxExecutor"
POOL_FILE = Path(__file__).with_name("executor_pool.py")
# The pool as its keeper and the executor's warm_pool option name it, from the Dags folder.
POOL_REFERENCE = f"{POOL_FILE.stem}:TRIES"


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


def with_executor(
    site: AirflowSite, server: ServerInfo, *, conn_id: str, bridge_ip: str
) -> AirflowSite:
    """The local ``site`` with the executor beside LocalExecutor and its api-server on the
    bridge the server's sandboxes reach this host by, ``bridge_ip`` (the stack state's: the
    Docker bridge's, or on the local cluster the pod bridge's gateway)."""
    settings = executor_settings(site, server, conn_id=conn_id, default_executor="LocalExecutor")
    return replace(site, host=bridge_ip, settings={**site.settings, **settings})


def with_warm_pool(site: AirflowSite, *, name: str, store: str, size: int) -> AirflowSite:
    """``site``, whose executor draws from the warm pool ``name`` of ``size`` sandboxes kept in
    the Redis ``store``, its module (executor_pool.py) linked into the Dags folder; run its keeper
    with :func:`kept_pool`."""
    dags = site.home / "dags"
    link = dags / POOL_FILE.name
    if not link.is_symlink():
        link.symlink_to(POOL_FILE)
    # The pool's module is imported from the Dags folder, which Airflow's scheduler does not
    # put on its path by itself.
    path = [str(dags), *filter(None, [os.environ.get("PYTHONPATH")])]
    settings = {
        "OPENSANDBOX_EXECUTOR_POOL_NAME": name,
        "OPENSANDBOX_EXECUTOR_POOL_STORE": store,
        "OPENSANDBOX_EXECUTOR_POOL_SIZE": str(size),
        "AIRFLOW__OPENSANDBOX_EXECUTOR__WARM_POOL": POOL_REFERENCE,
        "PYTHONPATH": os.pathsep.join(path),
    }
    return replace(site, settings={**site.settings, **settings})


@contextmanager
def kept_pool(site: AirflowSite) -> Iterator[Callable[[], str]]:
    """The keeper of the site's warm pool (:func:`with_warm_pool`), with the site's own options,
    once the pool is full. Yields what waits until it is full again."""
    log = components.log_file(site.home, "pool-keeper")
    folder, environment = site.home / "dags", site.environment()
    with pool_keeper.kept_pool(
        POOL_REFERENCE, folder=folder, environment=environment, log=log
    ) as keeper:
        yield keeper.wait_until_full
