"""Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point.

Airflow 3.3 builds the connection form from ``conn-fields`` and ``ui-field-behaviour`` here, without
importing the hook, so everything the form shows lives in this dict. It holds only what Airflow
reads at run time: the version Airflow shows comes from the distribution's metadata, and the
dependency ranges live in pyproject.toml alone.
"""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        # Airflow refuses (and breaks discovery of every provider) unless this equals the
        # canonicalized distribution name.
        "package-name": "airflow-provider-opensandbox",
        "name": "OpenSandbox",
        "description": (
            "Sandboxes on a self-hosted OpenSandbox server: the backend for the SandboxToolset of "
            "apache-airflow-providers-common-ai, an operator and a deferrable trigger for a "
            "command, and the @task.opensandbox decorator."
        ),
        "integrations": [
            {
                "integration-name": "OpenSandbox",
                "external-doc-url": "https://github.com/alibaba/OpenSandbox",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": "OpenSandbox",
                "python-modules": ["opensandbox_provider.hooks.opensandbox"],
            }
        ],
        "operators": [
            {
                "integration-name": "OpenSandbox",
                "python-modules": [
                    "opensandbox_provider.operators.opensandbox",
                    "opensandbox_provider.maintenance.operator",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": "OpenSandbox",
                "python-modules": ["opensandbox_provider.triggers.opensandbox"],
            }
        ],
        "task-decorators": [
            {
                "class-name": "opensandbox_provider.decorators.opensandbox.opensandbox_task",
                "name": "opensandbox",
            }
        ],
        "executors": ["opensandbox_provider.executors.OpenSandboxExecutor"],
        # Without it, Airflow 3.2+ imports the executor at every `airflow` command and warns on
        # stdout (see opensandbox_provider.cli).
        "cli": ["opensandbox_provider.cli.get_cli_commands"],
        # Airflow reads this list only when it discovers providers eagerly ([core]
        # lazy_discover_providers = False); otherwise it loads plugins from the
        # airflow.plugins entry point alone, so pyproject.toml declares that too, as Airflow's
        # own providers do.
        "plugins": [
            {
                "name": "opensandbox",
                "plugin-class": "opensandbox_provider.plugins.sandboxes.OpenSandboxPlugin",
            }
        ],
        "config": {
            "opensandbox": {
                "description": "Settings of the OpenSandbox provider, read by every process.\n",
                "options": {
                    "deployment_id": _option(
                        "The id stamped on every sandbox this Airflow deployment makes; a "
                        "retry, the hook's listing, the Sandboxes view, the maintenance "
                        "cleanup and a warm pool's draw act only on sandboxes carrying it. "
                        "Empty: an id made once and kept in this deployment's metadata "
                        "database as the Variable opensandbox_deployment_id. Set it the same "
                        "in every process of one deployment, and differently for each "
                        "deployment sharing a server.",
                        example="production",
                        default="",
                        version_added=None,
                    ),
                    "sandboxes_view": _option(
                        "Show the Sandboxes view in the Airflow 3 UI (Browse, and each task "
                        "instance's Sandboxes tab) and serve its pages under /opensandbox on "
                        "the api-server. False leaves the plugin empty; the hook's listing "
                        "and kill work either way. Read once when a process loads its "
                        "plugins, so a change takes a restart of the api-server.",
                        example="False",
                        default="True",
                        type_="boolean",
                    ),
                },
            },
            "opensandbox_executor": {
                "description": (
                    "Settings of the OpenSandboxExecutor, read by the scheduler, and by the "
                    "api-server to show a running try's log. A task's "
                    'executor_config={"opensandbox": {...}} overrides image, snapshot, cpu, '
                    "memory, resources, env, allow_egress_to and allow_egress_to_cidrs.\n"
                ),
                "options": {
                    "opensandbox_conn_id": _option(
                        "The opensandbox connection naming the server the tries' sandboxes run on.",
                        default="opensandbox_default",
                    ),
                    "image": _option(
                        "The image each try's sandbox runs: it must hold python3, "
                        "apache-airflow-core and apache-airflow-task-sdk at the scheduler's "
                        "versions, and the packages the Dags import. Empty: set snapshot.",
                        example="registry.internal/airflow-worker:3.3.2",
                        default="",
                    ),
                    "snapshot": _option(
                        "A snapshot to start each try's sandbox from instead of image, as "
                        "prepare_snapshot returns it.",
                        default="",
                    ),
                    "warm_pool": _option(
                        "A WarmPool to draw each try's sandbox from, named as its keeper names "
                        "it (module:attribute), defined with spec=sandbox_spec() from "
                        "opensandbox_provider.executors. Empty: every sandbox is created.",
                        example="my_pools:AIRFLOW_TRIES",
                        default="",
                    ),
                    "cpu": _option("The CPU limit of each try's sandbox.", default="1"),
                    "memory": _option("The memory limit of each try's sandbox.", default="2Gi"),
                    "sandbox_timeout": _option(
                        "The lease of each try's sandbox, in seconds: the scheduler renews it "
                        "while the try runs, and a sandbox no scheduler holds ends this long "
                        "after its last renewal unless a restarted scheduler adopts it first.",
                        default="600",
                        type_="float",
                    ),
                    "ready_timeout": _option(
                        "Seconds a new sandbox has to answer before the try fails.",
                        default="120",
                        type_="float",
                    ),
                    "try_timeout": _option(
                        "Seconds a try may run in its sandbox before the sandbox is ended and "
                        "the try failed; a task's execution_timeout ends it sooner, in the "
                        "Task SDK.",
                        default="86400",
                        type_="float",
                    ),
                    "execution_api_server_url": _option(
                        "Where the sandboxes reach the API server's execution API; its host is "
                        "the one address their egress allows. Empty: [core] "
                        "execution_api_server_url.",
                        example="http://airflow-api.internal:8080/execution/",
                        default="",
                    ),
                },
            },
        },
        "connection-types": [
            {
                "hook-class-name": "opensandbox_provider.hooks.opensandbox.OpenSandboxHook",
                "hook-name": "OpenSandbox",
                "connection-type": "opensandbox",
                "ui-field-behaviour": {
                    "hidden-fields": ["login"],
                    "relabeling": {
                        "host": "Server host",
                        "schema": "Protocol",
                        "password": "API key",
                    },
                    "placeholders": {
                        "host": "opensandbox.example.internal",
                        "port": "8080",
                        "schema": "http or https",
                        "password": "the server's api_key",
                        "request_timeout": "30",
                        "ca_bundle": "/etc/ssl/certs/opensandbox-ca.pem",
                        "cpu_request": "250m",
                        "memory_request": "256Mi",
                    },
                },
                "conn-fields": {
                    "request_timeout": {
                        "label": "Request timeout (s)",
                        "description": "Timeout of each request to the server, in seconds.",
                        "schema": {"type": ["number", "null"], "default": 30},
                    },
                    # No default: the UI masks the default of any field whose name contains
                    # "proxy" as "***" and would save that string into the connection.
                    "use_server_proxy": {
                        "label": "Use server proxy",
                        "description": (
                            "Reach execd through the lifecycle server instead of the sandbox's "
                            "published port. On unless switched off here or in the backend."
                        ),
                        "schema": {"type": ["boolean", "null"]},
                    },
                    "ca_bundle": {
                        "label": "CA bundle",
                        "description": (
                            "Path, on the workers and the api-server, of a PEM file of the "
                            "certificate authorities to trust for https besides the default ones."
                        ),
                        "schema": {"type": ["string", "null"]},
                    },
                    "cpu_request": {
                        "label": "CPU request",
                        "description": (
                            "What each sandbox asks a Kubernetes scheduler for, such as 250m; "
                            "empty asks for its CPU limit. The Docker runtime ignores it."
                        ),
                        "schema": {"type": ["string", "null"]},
                    },
                    "memory_request": {
                        "label": "Memory request",
                        "description": (
                            "What each sandbox asks a Kubernetes scheduler for, such as 256Mi; "
                            "empty asks for its memory limit. The Docker runtime ignores it."
                        ),
                        "schema": {"type": ["string", "null"]},
                    },
                },
            }
        ],
    }


def _option(
    description: str,
    *,
    default: str,
    example: str | None = None,
    type_: str = "string",
    version_added: str | None = "1.1.0",
) -> dict[str, Any]:
    """One option of a config section, as Airflow's provider schema has it."""
    return {
        "description": description + "\n",
        "version_added": version_added,
        "type": type_,
        "example": example,
        "default": default,
    }
