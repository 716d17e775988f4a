"""The cleanup as an Airflow task: kill the sandboxes no try of their task will use again, and
remove the snapshots no task has used for a set time."""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, BaseOperator

from opensandbox_provider._deployment import deployment_id
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.maintenance._cleanup import StateReader, kill_leaked_sandboxes
from opensandbox_provider.maintenance._unused_snapshots import (
    DEFAULT_UNUSED_SNAPSHOT_AGE,
    checked_unused_age,
    remove_unused_snapshots,
)
from opensandbox_provider.sandbox._lifecycle import Lifecycle

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class OpenSandboxCleanupOperator(BaseOperator):
    """
    Kill the sandboxes this provider made whose task instance no try will use again, then
    remove the snapshots this deployment prepared that no task has used for
    ``unused_snapshot_age`` (see :doc:`/operator`, "Cleaning up leaked sandboxes"). Needs
    Airflow 3, whose Task SDK it reads task instance states through. Returns the ids killed.

    :param opensandbox_conn_id: The OpenSandbox connection whose server is cleaned.
    :param dag_ids: Only these Dags' sandboxes; every Dag's when empty. Templated. Snapshots
        are the deployment's, not a Dag's: ``dag_ids`` does not narrow which are judged.
    :param unused_snapshot_age: How long no task may have used one of this deployment's
        snapshots before it is removed, as a ``timedelta`` or seconds, at least two hours;
        ``None`` removes none.
    """

    template_fields = ("dag_ids",)

    def __init__(
        self,
        *,
        opensandbox_conn_id: str = OpenSandboxHook.default_conn_name,
        dag_ids: Collection[str] | str = (),
        unused_snapshot_age: timedelta | float | None = DEFAULT_UNUSED_SNAPSHOT_AGE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.opensandbox_conn_id = opensandbox_conn_id
        self.dag_ids = dag_ids
        self.unused_snapshot_age = checked_unused_age(unused_snapshot_age)

    def execute(self, context: Context) -> list[str]:
        if isinstance(self.dag_ids, str):
            raise AirflowException(
                f"dag_ids rendered as the text {self.dag_ids!r}; give a list of Dag ids, or "
                "set render_template_as_native_obj=True on the Dag when it comes from a "
                "template."
            )
        hook = OpenSandboxHook(self.opensandbox_conn_id)
        killed = kill_leaked_sandboxes(hook, _task_states(context["ti"]), dag_ids=self.dag_ids)
        if self.unused_snapshot_age is not None:
            remove_unused_snapshots(
                Lifecycle(lambda: hook.connection_config),
                deployment=deployment_id(),
                unused_for=self.unused_snapshot_age,
            )
        return killed


def _task_states(ti: Any) -> StateReader:
    """What the running task instance ``ti`` can learn of other task instances' states."""
    # The task instance's own lookup is the Task SDK's public way to read other task
    # instances; Airflow 2 has none a task may use without the metadata database.
    get_task_states = getattr(ti, "get_task_states", None)
    if get_task_states is None:
        raise AirflowException(
            "The OpenSandbox cleanup reads task instance states through the Task SDK, which "
            "Airflow 2 does not have; run it on Airflow 3, or let the sandboxes' leases end "
            "them (docs/operator.rst, 'Cleaning up leaked sandboxes')."
        )
    return lambda identity: identity.state(get_task_states)
