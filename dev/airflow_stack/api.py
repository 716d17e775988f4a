"""The few calls of Airflow's REST API (v2) that the demo and the browser test make."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import httpx

FINISHED_RUN_STATES = frozenset({"success", "failed"})
FINISHED_TASK_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


class AirflowApi:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._http = httpx.Client(base_url=base_url, timeout=30.0)

    def close(self) -> None:
        self._http.close()

    def healthy(self) -> bool:
        """Whether the api-server answers and reports every other component healthy."""
        try:
            health = self._http.get("/api/v2/monitor/health").json()
        except (httpx.HTTPError, ValueError):
            return False
        return all(
            (health.get(part) or {}).get("status") == "healthy"
            for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
        )

    def log_in(self, username: str, password: str) -> str:
        response = self._http.post("/auth/token", json={"username": username, "password": password})
        response.raise_for_status()
        token = response.json()["access_token"]
        self._http.headers["Authorization"] = f"Bearer {token}"
        return str(token)

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if response.is_error:
            raise RuntimeError(
                f"Airflow answered {method} {path} with HTTP {response.status_code}: "
                f"{response.text}"
            )
        return response

    def put_connection(self, connection: dict[str, Any]) -> None:
        """Store the connection, replacing one of that id, so a re-run follows a restarted stack."""
        path = f"/api/v2/connections/{quote(connection['connection_id'], safe='')}"
        if self._http.get(path).status_code == 200:
            self._call("DELETE", path)
        self._call("POST", "/api/v2/connections", json=connection)

    def connection(self, conn_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/v2/connections/{quote(conn_id, safe='')}").json())

    def opensandbox_deployment(self) -> str:
        """The deployment id this Airflow stamps on its sandboxes, made by its api-server if no
        task made it yet: the Sandboxes view's listing reads it, and makes it if absent."""
        self._call("GET", "/opensandbox/api/sandboxes")
        variable = "/api/v2/variables/opensandbox_deployment_id"
        return str(self._call("GET", variable).json()["value"])

    def test_connection(self, connection: dict[str, Any]) -> dict[str, Any]:
        """What the connection form's Test button asks: ``{"status": bool, "message": str}``."""
        return dict(self._call("POST", "/api/v2/connections/test", json=connection).json())

    def import_errors(self) -> list[str]:
        errors = self._call("GET", "/api/v2/importErrors").json()["import_errors"]
        return [f"{error['filename']}: {error['stack_trace']}" for error in errors]

    def dag_is_known(self, dag_id: str) -> bool:
        return self._http.get(f"/api/v2/dags/{dag_id}").status_code == 200

    def dag_file(self, dag_id: str) -> str:
        """The file Airflow recorded the Dag as defined in, relative to its bundle: the file a
        try of it parses."""
        return str(self._call("GET", f"/api/v2/dags/{dag_id}/details").json()["relative_fileloc"])

    def unpause(self, dag_id: str) -> None:
        self._call("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, run_id: str, *, conf: dict[str, Any] | None = None) -> None:
        # logical_date is required by the schema but may be null, so null is sent.
        self._call(
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            json={"dag_run_id": run_id, "logical_date": None, "conf": conf or {}},
        )

    def run_state(self, dag_id: str, run_id: str) -> str:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}"
        return str(self._call("GET", path).json()["state"])

    def wait_for_run(self, dag_id: str, run_id: str, *, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            state = self.run_state(dag_id, run_id)
            if state in FINISHED_RUN_STATES:
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Dag run {dag_id}/{run_id} was still {state!r} after {timeout:.0f}s; see the "
                    "scheduler's output in the Airflow home's logs/ directory."
                )
            time.sleep(1.0)

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The Dag's runs, each with its ``dag_run_id``, ``run_type`` and ``state``."""
        return list(self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns").json()["dag_runs"])

    def asset_events(self, *, source_dag_id: str, source_run_id: str) -> list[dict[str, Any]]:
        """The asset events a Dag run's tasks recorded, each with its ``uri`` and the
        ``created_dagruns`` it started."""
        params = {"source_dag_id": source_dag_id, "source_run_id": source_run_id}
        answer = self._call("GET", "/api/v2/assets/events", params=params).json()
        return list(answer["asset_events"])

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's task instances by task id: each with its ``state``, ``start_date``, ..."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances"
        instances = self._call("GET", path).json()["task_instances"]
        return {instance["task_id"]: instance for instance in instances}

    def task_instance_list(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, each map index of a mapped task on its own, with its
        ``hostname``: where it ran."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances"
        instances: list[dict[str, Any]] = []
        while True:
            # A page holds at most 100 by default ([api] maximum_page_limit).
            page = self._call("GET", path, params={"limit": 100, "offset": len(instances)}).json()
            instances += page["task_instances"]
            if not page["task_instances"] or len(instances) >= page["total_entries"]:
                return instances

    def wait_for_task_state(
        self, dag_id: str, run_id: str, task_id: str, state: str, *, timeout: float
    ) -> None:
        """Wait until the task is in ``state``; a task that finished in another one raises."""
        deadline = time.monotonic() + timeout
        while True:
            # A run's task instances are made by the scheduler a moment after the run.
            current = self.task_instances(dag_id, run_id).get(task_id, {}).get("state")
            if current == state:
                return
            if current in FINISHED_TASK_STATES:
                raise RuntimeError(
                    f"Task {dag_id}/{run_id}/{task_id} ended {current!r} before it was {state!r}."
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Task {dag_id}/{run_id}/{task_id} was still {current!r}, not {state!r}, "
                    f"after {timeout:.0f}s."
                )
            time.sleep(0.5)

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        """Set the task's state as a person does in the UI ("Mark as failed", ...)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
        self._call("PATCH", path, json={"new_state": state})

    def triggerer_host(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        """The host of the triggerer that runs the deferred task's trigger; ``None`` while no
        triggerer has taken it up."""
        instance = self.task_instances(dag_id, run_id)[task_id]
        triggerer_id = (instance.get("trigger") or {}).get("triggerer_id")
        if triggerer_id is None:
            return None
        answer = self._call(
            "GET", "/api/v2/jobs", params={"job_type": "TriggererJob", "limit": 100}
        )
        hosts = {job["id"]: job["hostname"] for job in answer.json()["jobs"]}
        return hosts.get(triggerer_id)

    def return_value(self, dag_id: str, run_id: str, task_id: str) -> Any:
        """The XCom a task returned, as the worker stored it."""
        return self.xcom(dag_id, run_id, task_id, key="return_value")

    def xcom(self, dag_id: str, run_id: str, task_id: str, *, key: str) -> Any:
        """One XCom of a task, as the worker stored it."""
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
            f"/xcomEntries/{quote(key, safe='')}"
        )
        return self._call("GET", path, params={"deserialize": "true"}).json()["value"]

    def xcoms(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        """Every XCom of a task by key, each as the worker stored it; the listing names only
        the keys, so each value is read on its own."""
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
            "/xcomEntries"
        )
        entries = self._call("GET", path).json()["xcom_entries"]
        return {
            entry["key"]: self.xcom(dag_id, run_id, task_id, key=entry["key"]) for entry in entries
        }

    def put_pool(self, name: str, *, slots: int) -> None:
        """Create the pool, or set its slots; deferred tasks do not take a slot of it."""
        path = f"/api/v2/pools/{quote(name, safe='')}"
        pool = {"name": name, "slots": slots, "include_deferred": False}
        if self._http.get(path).status_code == 200:
            self._call("PATCH", path, json=pool)
        else:
            self._call("POST", "/api/v2/pools", json=pool)

    def task_try_number(self, dag_id: str, run_id: str, task_id: str) -> int:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
        return int(self._call("GET", path).json()["try_number"])

    def task_log(self, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
        """The task's log as structured events, each with at least ``event`` and ``level``."""
        try_number = self.task_try_number(dag_id, run_id, task_id)
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
            f"/logs/{try_number}"
        )
        # Only JSON or NDJSON is served; an Accept of text/plain is refused.
        content = self._call("GET", path, headers={"Accept": "application/json"}).json()["content"]
        return [event for event in content if isinstance(event, dict)]
