"""
The Airflow deployment a sandbox belongs to, stamped on it beside the task instance: two
deployments on one server run the same Dags with the same run ids, so every filter that acts on
sandboxes by task identity filters on this id too (docs/installation.rst). Left unset, the id is
kept in the metadata database, which is what makes a deployment one: neither a hash of the
connection (two deployments may share it) nor of a secret (a digest on every sandbox) would do.
"""

from __future__ import annotations

import functools
import re
import uuid
from contextlib import suppress

from opensandbox_provider import _variables

KEY = "airflow-deployment"
"""The metadata key holding the deployment id."""
SECTION, OPTION = "opensandbox", "deployment_id"
VARIABLE = "opensandbox_deployment_id"
"""The Airflow Variable a deployment's id is kept in when the option is not set."""

# A metadata value, under OpenSandbox's label rule.
_VALID = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DESCRIPTION = (
    "Made once by airflow-provider-opensandbox: the id stamped on this deployment's sandboxes, "
    "so that another Airflow deployment on the same server never lists or kills them. Do not "
    "change it while sandboxes run."
)


class DeploymentUnknownError(RuntimeError):
    """This process can neither read nor make the deployment's id."""


def deployment_id() -> str:
    """This deployment's id: the option when set, else the one its metadata database keeps."""
    from airflow.configuration import conf

    configured = (conf.get(SECTION, OPTION, fallback="") or "").strip()
    if configured:
        return checked(configured, source=f"[{SECTION}] {OPTION}")
    return _stored()


def checked(value: str, *, source: str) -> str:
    """``value`` if it can be stamped as metadata; otherwise a message saying how to fix it."""
    if not _VALID.fullmatch(value):
        raise DeploymentUnknownError(
            f"{source} is {value[:100]!r}, which cannot be stamped on a sandbox: use 1 to 63 "
            "letters, digits, '-', '_' and '.', starting and ending with a letter or digit."
        )
    return value


@functools.cache
def _stored() -> str:
    # Cached for the process: the id of a metadata database never changes once made.
    from airflow.providers.common.compat.sdk import AirflowTaskTimeout

    try:
        value = _read() or _create(uuid.uuid4().hex)
    except (DeploymentUnknownError, AirflowTaskTimeout):
        raise
    except Exception as e:
        raise DeploymentUnknownError(
            f"Could not read or make this Airflow deployment's id, the Variable {VARIABLE} "
            f"({type(e).__name__}: {e}). Set [{SECTION}] {OPTION} "
            f"(AIRFLOW__{SECTION.upper()}__{OPTION.upper()}) to a name for this deployment, "
            "the same in every process of it and different from every other deployment's."
        ) from e
    return checked(value, source=f"The Variable {VARIABLE}")


def _read() -> str | None:
    value = _variables.read(VARIABLE)
    return None if value is None else value.strip() or None


def _create(candidate: str) -> str:
    """Store ``candidate`` unless another process stored an id first; the id stored."""
    if _variables.under_task_sdk():
        # The Execution API can only overwrite a Variable, not create one if absent: read back
        # what was written last. Two first tasks of a new deployment in the same instant could
        # still each keep their own; the option, or an api-server that made it first, avoids
        # that.
        _variables.write(VARIABLE, candidate, description=_DESCRIPTION)
        return _read() or candidate
    # An insert, not Variable.set (which replaces): the key is unique in the table, so of
    # processes racing to make the id exactly one insert lands and the others read it.
    from airflow.models.variable import Variable as VariableRow
    from airflow.utils.session import create_session
    from sqlalchemy.exc import IntegrityError

    with suppress(IntegrityError), create_session() as session:
        session.add(VariableRow(key=VARIABLE, val=candidate, description=_DESCRIPTION))
    value = _read()
    if value is None:
        raise DeploymentUnknownError(f"The Variable {VARIABLE} was made but cannot be read back.")
    return value
