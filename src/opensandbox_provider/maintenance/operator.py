"""The cleanup as an Airflow task: kill the sandboxes no try of their task will use again."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, BaseOperator

from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.maintenance._cleanup import StateReader, kill_leaked_sandboxes

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

    from opensandbox_provider._identity import TaskInstanceIdentity


class OpenSandboxCleanupOperator(BaseOperator):
    """
    Kill the sandboxes this provider made whose task instance no try will use again: one in
    a finished state, failed with retries left, cleared, or gone. A task instance that is
    scheduled, queued, running, deferred, restarting, waiting to be rescheduled or for input
    keeps its sandboxes, as does one in a state this provider does not know.

    Needs Airflow 3: it reads task instance states through the Task SDK. Returns the ids
    killed, each also logged with the state that decided it.

    :param opensandbox_conn_id: The OpenSandbox connection whose server is cleaned.
    :param dag_ids: Only these Dags' sandboxes; every Dag's when empty. Templated.
    """

    template_fields = ("dag_ids",)

    def __init__(
        self,
        *,
        opensandbox_conn_id: str = OpenSandboxHook.default_conn_name,
        dag_ids: Collection[str] | str = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.opensandbox_conn_id = opensandbox_conn_id
        self.dag_ids = dag_ids

    def execute(self, context: Context) -> list[str]:
        if isinstance(self.dag_ids, str):
            raise AirflowException(
                f"dag_ids rendered as the text {self.dag_ids!r}; give a list of Dag ids, or "
                "set render_template_as_native_obj=True on the Dag when it comes from a "
                "template."
            )
        hook = OpenSandboxHook(self.opensandbox_conn_id)
        return kill_leaked_sandboxes(hook, _task_states(context["ti"]), dag_ids=self.dag_ids)


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

    def state_of(identity: TaskInstanceIdentity) -> str | None:
        answer = get_task_states(
            dag_id=identity.dag_id,
            task_ids=[identity.task_id],
            run_ids=[identity.run_id],
            map_index=identity.map_index,
        )
        # How the Task SDK names a task instance in its answer: a mapped one with its index.
        key = (
            identity.task_id
            if identity.map_index < 0
            else f"{identity.task_id}_{identity.map_index}"
        )
        state = (answer.get(identity.run_id) or {}).get(key)
        # A TaskInstanceState is a str whose hash is not its value's.
        return None if state is None else str(getattr(state, "value", state))

    return state_of
