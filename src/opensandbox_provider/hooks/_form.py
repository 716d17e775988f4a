"""
The connection form as Airflow before 3.2 builds it: from the hook's methods.

Airflow 3.2 and later read ``conn-fields`` and ``ui-field-behaviour`` from the provider info
and never call these; 2.11 calls them in its webserver. Both are derived from the provider
info, so the form is described in one place.
"""

from __future__ import annotations

from typing import Any

from opensandbox_provider.get_provider_info import get_provider_info


def _connection_type() -> dict[str, Any]:
    (connection,) = get_provider_info()["connection-types"]
    return connection


def connection_form_widgets() -> dict[str, Any]:
    """Each extra of ``conn-fields`` as a text field, with its label and description.

    Text, not a checkbox, for ``use_server_proxy`` as well: an unticked checkbox saves
    ``false``, and the setting is on unless someone switches it off.
    """
    # Airflow 2's webserver brings these; importing them at module level would make the hook
    # need Flask wherever it is imported.
    from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
    from flask_babel import lazy_gettext
    from wtforms import StringField

    return {
        name: StringField(
            lazy_gettext(field["label"]),
            widget=BS3TextFieldWidget(),
            description=field["description"],
            default=field["schema"].get("default"),
        )
        for name, field in _connection_type()["conn-fields"].items()
    }


def ui_field_behaviour() -> dict[str, Any]:
    """``ui-field-behaviour`` under the names Airflow 2 reads."""
    behaviour = _connection_type()["ui-field-behaviour"]
    return {name.replace("-", "_"): value for name, value in behaviour.items()}
