"""Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point.

Airflow 3.3 builds the connection form from ``conn-fields`` and ``ui-field-behaviour`` here, without
importing the hook, so everything the form shows lives in this dict.
"""

from __future__ import annotations

from typing import Any

from opensandbox_provider import __version__


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
        "versions": [__version__],
        # The ranges of pyproject.toml, which the compatibility matrix proves (a unit test
        # keeps the two equal); shown here for whoever reads the provider's metadata.
        "dependencies": [
            "apache-airflow>=2.11.1,<4",
            "apache-airflow-providers-common-ai>=1.0.0,<2",
            "apache-airflow-providers-common-compat>=1.22.0,<2",
        ],
        "optional-dependencies": {
            "opensandbox": [
                "opensandbox>=1.1.0,<2",
                "httpx>=0.28,<1",
                "httpcore>=1.0.9,<2",
                "h11>=0.16,<1",
            ],
            "pool": [
                "opensandbox>=1.1.0,<2",
                "redis>=5.0,<9",
            ],
        },
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
        "config": {
            "opensandbox": {
                "description": "Settings of the OpenSandbox provider, read by every process.\n",
                "options": {
                    "deployment_id": {
                        "description": (
                            "The id stamped on every sandbox this Airflow deployment makes; a "
                            "retry, the hook's listing, the Sandboxes view, the maintenance "
                            "cleanup and a warm pool's draw act only on sandboxes carrying it. "
                            "Empty: an id made once and kept in this deployment's metadata "
                            "database as the Variable opensandbox_deployment_id. Set it the same "
                            "in every process of one deployment, and differently for each "
                            "deployment sharing a server.\n"
                        ),
                        "version_added": None,
                        "type": "string",
                        "example": "production",
                        "default": "",
                    }
                },
            }
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
