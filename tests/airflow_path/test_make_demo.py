"""`make demo`: Airflow up, the system-test Dags run, their stories printed, all stopped after."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from dev.airflow_stack import components
from dev.airflow_stack.home import AIRFLOW_DIR, REPO
from dev.airflow_stack.running import DEMO_DAGS, EXECUTOR_DAG, OPERATOR_DAG, TOOLSET_DAG
from dev.stack.state import ServerInfo
from tests.airflow_path import demo_process

# Start-up, the runs and the stop took about a minute here; the bound only keeps a hang finite.
DEMO_TIMEOUT = 900


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _recorded_pids(home: Path) -> list[int]:
    return [int(path.read_text().split()[0]) for path in (home / "run").glob("*.pid")]


def test_make_demo_once_exits_zero_after_green_runs_of_its_dags(plain_server: ServerInfo) -> None:
    home = AIRFLOW_DIR / "pytest-demo-once"
    result = subprocess.run(
        ["make", "--no-print-directory", "demo", "ONCE=1", f"DEMO_HOME={home}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    for dag in (*DEMO_DAGS, EXECUTOR_DAG):
        # Each Dag's run is reported by its id, and its last task logged the line that it
        # writes only once every check of the Dag passed.
        assert f"__{dag.dag_id}: success in " in result.stdout, result.stdout[-4000:]
        assert dag.passed_line in result.stdout
    toolset, operator = (_section(result.stdout, dag.dag_id) for dag in (TOOLSET_DAG, OPERATOR_DAG))
    for expected in ("Created OpenSandbox sandbox", "Destroyed sandbox"):
        assert expected in toolset
    # The operator Dag's story: a sandbox per task, the script's output, the deferred
    # command's lines logged from the triggerer in order, each sandbox destroyed.
    # One sandbox per task, and one more in which the decorated task's requirements were
    # installed, since each run of the test starts without its prepared environment.
    # warm_start's is taken from the warm pool the demo keeps, cold_start's is created.
    assert operator.count("Created OpenSandbox sandbox") == 5, operator
    assert operator.count("Took from warm pool example-operator OpenSandbox sandbox") == 1
    assert operator.count("Destroyed sandbox") == 6, operator
    assert "Warm pool example-operator: 1 of 1 idle." in result.stdout
    waited = re.compile(r"(\w+_start): sandbox asked for to first command: ([\d.]+)s \((.+)\)")
    waits = {match[1]: match[3] for match in waited.finditer(operator)}
    assert waits == {"cold_start": "cold", "warm_start": "warm pool"}, operator
    assert "  [run_script] [sandbox stdout] 3" in operator.splitlines(), operator
    assert "  [run_script] [sandbox stdout] token: ***" in operator.splitlines(), operator
    assert "(asset opensandbox_demo_word_counts)" in operator, operator
    assert "which holds its requirements: osb-demo-words==1.0." in operator, operator
    ticks = [operator.index(f"[long_command] [sandbox stdout] tick {n}") for n in (1, 2, 3)]
    assert ticks == sorted(ticks), operator
    # The executor Dag's three mapped tries ran on three sandboxes, said by its last task, and
    # Airflow recorded each try on a host of its own.
    executor = _section(result.stdout, EXECUTOR_DAG.dag_id)
    assert "[check] three tries on three sandboxes" in executor, executor
    ran_on = re.compile(r"^  where\[(\d)\]: success on (\S+)$", re.MULTILINE)
    hosts = {match[1]: match[2] for match in ran_on.finditer(result.stdout)}
    assert sorted(hosts) == ["0", "1", "2"] and len(set(hosts.values())) == 3, result.stdout
    assert "Login: admin / " in result.stdout
    assert "Airflow stopped." in result.stdout
    assert _recorded_pids(home) == [], "a component's PID file outlived the demo"


def _section(output: str, dag_id: str) -> str:
    """What the demo printed about ``dag_id``'s run, from its heading to its run's state."""
    start = output.index(f"\n{dag_id}: key lines of the task logs")
    return output[start : output.index(f"__{dag_id}: ", start)]


def test_demo_stops_every_component_on_ctrl_c(plain_server: ServerInfo) -> None:
    home = AIRFLOW_DIR / "pytest-demo-interrupted"
    # One Dag, the quickest: what Ctrl-C stops is the same whichever Dags ran.
    only = ["--dag", TOOLSET_DAG.dag_id]
    demo = demo_process.start(
        [sys.executable, "-m", "dev.airflow_stack", "demo", "--home", str(home), *only], cwd=REPO
    )
    try:
        lines = []
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.append(line)
            if "stays up until Ctrl-C" in line:
                break
        else:
            raise AssertionError("The demo ended before it was up:\n" + "".join(lines))
        started = _recorded_pids(home)
        assert len(started) == len(components.COMPONENTS)
        demo.send_signal(signal.SIGINT)
        rest, _ = demo.communicate(timeout=120)
        assert demo.returncode == 0, "".join(lines) + rest
        assert "Airflow stopped." in rest
        deadline = time.monotonic() + 10
        while any(_group_alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in started if _group_alive(pid)], "a component outlived Ctrl-C"
    finally:
        # Passed, this finds nothing left; failed, it leaves nothing running.
        demo_process.stop(demo, home)
