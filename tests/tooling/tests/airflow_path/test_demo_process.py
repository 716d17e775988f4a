"""How the demo's tests start and stop it (tests/airflow_path/demo_process.py), with small
processes in place of the demo and of Airflow's components."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dev.airflow_stack import components
from tests.airflow_path import demo_process

REPO = Path(__file__).resolve().parents[4]
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]
# A demo deaf to SIGTERM, as a hung one is, which started a helper in its session (as the
# demo starts the warm pool's keeper) and says the helper's PID.
DEAF_DEMO = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(helper.pid, flush=True)
time.sleep(600)
"""
# Started with SIGINT ignored, as a job a script runs in the background is: it starts a
# program through demo_process, sends it SIGINT once it is ready and says how it ended.
IGNORING_DRIVER = """
import signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
from tests.airflow_path import demo_process
program = "import time; print('ready', flush=True); time.sleep(60)"
child = demo_process.start([sys.executable, "-c", program], cwd=sys.argv[1])
child.stdout.readline()
child.send_signal(signal.SIGINT)
try:
    print(child.wait(timeout=20))
except subprocess.TimeoutExpired:
    child.kill()
    print("still running")
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process; a zombie waiting for its parent to reap it is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_demo_deaf_to_sigterm_is_killed_with_its_helper_and_its_components_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo_process, "DEMO_STOP_GRACE_SECONDS", 1.0)
    # Each in a session of its own, recorded by PID, as the demo starts Airflow's components.
    for name in ("api-server", "scheduler"):
        components.launch(tmp_path, name, SLEEP, dict(os.environ))
    recorded = {name: components.pid(tmp_path, name) for name in ("api-server", "scheduler")}
    demo = demo_process.start([sys.executable, "-c", DEAF_DEMO], cwd=tmp_path)
    assert demo.stdout is not None
    helper = int(demo.stdout.readline())

    assert demo_process.stop(demo, tmp_path) == ["api-server", "scheduler"]

    assert demo.returncode == -signal.SIGKILL
    assert not _running(helper)
    assert not [name for name, pid in recorded.items() if pid is None or _running(pid)]


def test_a_demo_that_ended_leaves_only_its_components_to_stop(tmp_path: Path) -> None:
    components.launch(tmp_path, "triggerer", SLEEP, dict(os.environ))
    triggerer = components.pid(tmp_path, "triggerer")
    demo = demo_process.start([sys.executable, "-c", "pass"], cwd=tmp_path)
    demo.communicate(timeout=60)

    assert demo_process.stop(demo, tmp_path) == ["triggerer"]

    assert triggerer is not None and not _running(triggerer)
    assert demo.returncode == 0


def test_the_demo_sees_sigint_though_its_starter_ignores_it() -> None:
    result = subprocess.run(
        [sys.executable, "-c", IGNORING_DRIVER, str(REPO)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # Python ends a KeyboardInterrupt nobody caught by SIGINT, as the shell expects.
    assert result.stdout.strip() == str(-signal.SIGINT), result.stdout + result.stderr
