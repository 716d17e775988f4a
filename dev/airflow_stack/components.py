"""Starts Airflow's four components, each in its own session with a PID file, and stops them by PID.

``airflow standalone`` started from a script ignores SIGINT, and terminating it orphans the
scheduler and api-server (SIGTERM reaches only its supervisor). Each component here leads its own
process group instead, so one signal to that group ends the component and every worker it forked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dev.airflow_stack.home import AirflowSite

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")

# Airflow's components finish in-flight work on SIGTERM; measured, all four were gone within
# 6 s. Past this a component is killed, so a wedged one cannot keep `make demo` from exiting.
STOP_GRACE_SECONDS = 30.0


def _pid_file(home: Path, component: str) -> Path:
    return home / "run" / f"{component}.pid"


def log_file(home: Path, component: str) -> Path:
    return home / "logs" / f"{component}.out"


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name; None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name in parentheses may contain spaces; the fields after it do not.
    return stat.rsplit(")", 1)[1].split()


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return None if fields is None else fields[19]


def _live_pid(pid_file: Path) -> int | None:
    """The component's PID if it still runs, judged by the start time written beside it.

    Airflow rewrites its process titles, and setproctitle overwrites /proc/<pid>/environ as
    well, so the start time is what tells the component from a process that reused its PID.
    """
    if not pid_file.exists():
        return None
    pid_text, started = pid_file.read_text().split()
    pid = int(pid_text)
    fields = _stat(pid)
    if fields is None or fields[19] != started or fields[0] == "Z":
        return None
    return pid


def _reap(pid: int) -> None:
    # A component this process started stays a zombie, still in its group, until reaped.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _wait_gone(pid: int, deadline: float) -> bool:
    """Wait until no process is left in the group ``pid`` leads."""
    while time.monotonic() < deadline:
        _reap(pid)
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def stop(home: Path, components: tuple[str, ...] = COMPONENTS) -> list[str]:
    """Stop the ``components`` started in ``home`` (all four by default); returns the names of
    those that were running."""
    running: dict[str, int] = {}
    for component in components:
        pid_file = _pid_file(home, component)
        pid = _live_pid(pid_file)
        if pid is not None:
            os.killpg(pid, signal.SIGTERM)
            running[component] = pid
        pid_file.unlink(missing_ok=True)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for pid in running.values():
        if not _wait_gone(pid, deadline):
            os.killpg(pid, signal.SIGKILL)
            _wait_gone(pid, time.monotonic() + 5)
    return list(running)


def start(site: AirflowSite, components: tuple[str, ...] = COMPONENTS) -> None:
    """Start the ``components`` (all four by default) in the background; ``stop`` ends them."""
    environment = site.environment()
    for component in components:
        launch(site.home, component, [sys.executable, "-m", "airflow", component], environment)


def launch(
    home: Path, name: str, argv: list[str], environment: dict[str, str], *, user: str | None = None
) -> None:
    """Start ``argv`` as ``name`` in its own session, output to its log in ``home``, PID
    recorded for ``stop``; as ``user`` when given (a server that refuses to run as root)."""
    (home / "run").mkdir(exist_ok=True)
    (home / "logs").mkdir(exist_ok=True)
    with log_file(home, name).open("ab") as log:
        process = subprocess.Popen(
            argv,
            cwd=home,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=user,
            group=user,
        )
    _pid_file(home, name).write_text(f"{process.pid} {_start_time(process.pid)}\n")


def pid(home: Path, component: str) -> int | None:
    """The PID of ``component`` as started in ``home``, which leads its process group; None
    if it is not running."""
    return _live_pid(_pid_file(home, component))


def dead(home: Path, components: tuple[str, ...] = COMPONENTS) -> list[str]:
    """The ``components`` that were started in ``home`` and are no longer running."""
    return [
        component
        for component in components
        if _pid_file(home, component).exists() and _live_pid(_pid_file(home, component)) is None
    ]


def log_tail(home: Path, component: str, lines: int = 30) -> str:
    path = log_file(home, component)
    if not path.exists():
        return "(no output)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def migrate(site: AirflowSite) -> None:
    """Create or upgrade the metadata database; SQLite, inside the home."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        cwd=site.home,
        env=site.environment(),
        capture_output=True,
        text=True,
    )
    if result.returncode:
        raise RuntimeError(
            f"`airflow db migrate` failed with exit code {result.returncode}:\n"
            f"{result.stdout[-2000:]}{result.stderr[-2000:]}"
        )
