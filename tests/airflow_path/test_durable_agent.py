"""A durable agent's retry under `airflow dags test`, against the stack's server: the retry
adopts the sandbox its first try parked, so the calls the journal replays and the sandbox agree;
and when that sandbox is gone, the retry fails saying so instead of going on in a fresh one."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from dev.stack.state import ServerInfo
from tests.airflow_path.dags_test import AIRFLOW, prepared
from tests.reliability.cleanup import destroy_directly
from tests.topology.dags import opensandbox_durable_agent as durable

DAG_FILE = Path(durable.__file__)
CREATED = re.compile(r"Created OpenSandbox sandbox (\S+) ")
PARKED = re.compile(r"Parked sandbox (\S+) for the next try")
ADOPTED = re.compile(r"Adopted sandbox (\S+), which try 1 of this task parked")


def test_a_durable_agents_retry_adopts_the_sandbox_its_first_try_parked_or_fails_without_it(
    plain_server: ServerInfo, tmp_path: Path
) -> None:
    environment = prepared(DAG_FILE, plain_server, tmp_path)
    result = subprocess.run(
        [*AIRFLOW, "dags", "test", durable.DAG_ID],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    created = CREATED.findall(output)
    try:
        # One task succeeded, the other failed as it should: the run failed.
        assert "state=failed" in output, output[-4000:]
        # Each task's first try made its sandbox and made two calls there, then failed, which
        # parked the sandbox; neither retry made one.
        assert output.count(durable.FIRST_TRY_FAILS) >= 2, output[-4000:]
        assert len(created) == 2, created
        assert sorted(PARKED.findall(output)) == sorted(created), output[-4000:]
        # The retry of `agent` adopted its sandbox and read back both lines, each once: the
        # write and the append were replayed, not run again, in the sandbox they were made in.
        [adopted] = ADOPTED.findall(output)
        assert adopted in created
        assert f"{durable.READ_BACK} '[stdout]\\nfirst\\nsecond'" in output, output[-4000:]
        # The retry of the other found its sandbox gone, and said what to do.
        assert "replays tool calls an earlier try made in its sandbox" in output
        assert f"task {durable.GONE_TASK_ID!r}" in output
        assert "raise the backend's park_margin" in output
        # Neither retry's end left a sandbox: the success destroyed the adopted one.
        assert [handle for handle in created if plain_server.has_sandbox(handle)] == []
    finally:
        destroy_directly(plain_server, created)
