"""One long ``OpenSandboxOperator`` command with a retry: for losing the worker that runs it.

Each try appends its start, its ticks and its end to a file on a named volume every try
mounts, so the test reads in one file, in the order they happened, what each try's command did.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Param, dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.sandbox import NamedVolume

DAG_ID = "opensandbox_long_retried"
TASK_ID = "long"
# Made by the test before the run and removed after it.
TRIES_VOLUME = "opensandbox-topology-tries"
TRIES_FILE = "tries.log"
TRIES_MOUNT = "/tries"
# The first try runs long enough to be still running when its lost worker's task is failed
# (a heartbeat timeout after the kill) and the retry starts; the retry is short.
COMMAND = f"""\
t={{{{ ti.try_number }}}}; log={TRIES_MOUNT}/{TRIES_FILE}
echo "try $t start" >> $log
for i in $(seq {{{{ params.ticks if ti.try_number == 1 else params.retry_ticks }}}}); do
  echo "try $t tick $i" >> $log; echo tick $i; sleep 1
done
echo "try $t end" >> $log
"""


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    params={
        "ticks": Param(240, type="integer", minimum=1),
        "retry_ticks": Param(10, type="integer", minimum=1),
    },
)
def opensandbox_long_retried():
    # Not deferred: the command is watched by the worker that runs the task, so losing that
    # worker loses the try.
    OpenSandboxOperator(
        task_id=TASK_ID,
        spec=SandboxSpec(block_network=False),
        cpu="100m",
        memory="256Mi",
        volumes=[NamedVolume(TRIES_VOLUME, TRIES_MOUNT, read_only=False)],
        command=COMMAND,
        retries=1,
        retry_delay=timedelta(seconds=1),
    )


opensandbox_long_retried()
