"""`make demo`: Airflow up, the system-test Dag run, its story printed, all stopped after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dev.airflow_stack import components
from dev.airflow_stack.home import AIRFLOW_DIR, REPO
from dev.airflow_stack.running import PASSED_LINE
from dev.stack.state import ServerInfo

# Start-up, one run and the stop took about a minute here; the bound only keeps a hang finite.
DEMO_TIMEOUT = 900


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _recorded_pids(home: Path) -> list[int]:
    return [int(path.read_text().split()[0]) for path in (home / "run").glob("*.pid")]


def test_make_demo_once_exits_zero_after_a_green_run(plain_server: ServerInfo) -> None:
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
    for expected in ("Created OpenSandbox sandbox", "Destroyed sandbox", PASSED_LINE):
        assert expected in result.stdout
    assert ": success in " in result.stdout
    assert "Login: admin / " in result.stdout
    assert "Airflow stopped." in result.stdout
    assert _recorded_pids(home) == [], "a component's PID file outlived the demo"


def test_demo_stops_every_component_on_ctrl_c(plain_server: ServerInfo) -> None:
    home = AIRFLOW_DIR / "pytest-demo-interrupted"
    demo = subprocess.Popen(
        [sys.executable, "-m", "dev.airflow_stack", "demo", "--home", str(home)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
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
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 0, "".join(lines) + rest
    assert "Airflow stopped." in rest
    deadline = time.monotonic() + 10
    while any(_group_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in started if _group_alive(pid)], "a component outlived Ctrl-C"
