"""Run inside a combination's environment: what its Airflow registers for the connection type.

Prints one JSON object: the provider and hook Airflow discovered, the extras' form fields and
the relabelled fields, as the ProvidersManager of that Airflow line builds them.
"""

from __future__ import annotations

import json

from airflow.providers_manager import ProvidersManager

CONN_TYPE = "opensandbox"


def main() -> None:
    providers = ProvidersManager()
    hook = providers.hooks.get(CONN_TYPE)
    widgets = providers.connection_form_widgets
    behaviour = providers.field_behaviours.get(CONN_TYPE) or {}
    print(
        json.dumps(
            {
                "provider": "airflow-provider-opensandbox" in providers.providers,
                "hook": getattr(hook, "hook_class_name", None),
                "fields": sorted(
                    widget.field_name
                    for key, widget in widgets.items()
                    if key.startswith(f"extra__{CONN_TYPE}__")
                ),
                "relabeling": behaviour.get("relabeling", {}),
                "hidden_fields": behaviour.get("hidden_fields", []),
            }
        )
    )


if __name__ == "__main__":
    main()
