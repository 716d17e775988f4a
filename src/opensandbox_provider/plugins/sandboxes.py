"""The Sandboxes view: an Airflow 3 UI page of every sandbox this provider made, with a kill.

Registered as Airflow's own providers register theirs: in the provider info's ``plugins`` and
through the ``airflow.plugins`` entry point. Every Airflow process loads plugins, a task's too,
and Airflow's API security module alone takes seconds to import, so the page's FastAPI app is
built on its first request, in the api-server only (``_app.py``). ``[opensandbox]
sandboxes_view = False``, or an Airflow before 3.1, leaves the plugin empty: no page, no link,
no app.
"""

from __future__ import annotations

import re
from typing import Any

from airflow import __version__ as airflow_version
from airflow.plugins_manager import AirflowPlugin
from airflow.providers.common.compat.sdk import conf

URL_PREFIX = "/opensandbox"
PAGE = f"{URL_PREFIX}/sandboxes"

# Airflow 3.0 has no external views to link the page from, and its API resolves a user only
# from a bearer header, which a page the browser navigates to does not send.
FIRST_AIRFLOW_WITH_THE_VIEW = (3, 1)


def view_enabled() -> bool:
    """Whether this deployment shows the Sandboxes view (``[opensandbox] sandboxes_view``)."""
    major_minor = re.match(r"(\d+)\.(\d+)", airflow_version)
    if major_minor and tuple(map(int, major_minor.groups())) < FIRST_AIRFLOW_WITH_THE_VIEW:
        return False
    return conf.getboolean("opensandbox", "sandboxes_view", fallback=True)


class _AppOnFirstRequest:
    """An ASGI app that builds the real one when the api-server first routes a request to it."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from opensandbox_provider.plugins._app import build_app

            self._app = build_app()
        await self._app(scope, receive, send)

    def __repr__(self) -> str:
        return "opensandbox_provider.plugins._app:build_app()"


class OpenSandboxPlugin(AirflowPlugin):
    """The Sandboxes page in the UI's Browse menu, and a task instance's sandboxes on its page."""

    name = "opensandbox"
    # Read as Airflow loads the plugin, which it does once per process, after its settings.
    _enabled = view_enabled()
    fastapi_apps = (
        [{"app": _AppOnFirstRequest(), "url_prefix": URL_PREFIX, "name": "OpenSandbox sandboxes"}]
        if _enabled
        else []
    )
    external_views = (
        [
            {
                "name": "Sandboxes",
                "href": PAGE,
                "destination": "nav",
                "category": "browse",
                "url_route": "opensandbox-sandboxes",
            },
            {
                "name": "Sandboxes",
                "href": f"{PAGE}?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}"
                "&map_index={MAP_INDEX}",
                "destination": "task_instance",
                "url_route": "opensandbox-task-sandboxes",
            },
        ]
        if _enabled
        else []
    )
