"""The run-wide leak check (tests/leak_check.py) still fails a run when the test that leaves a
sandbox's container behind ran in a pytest-xdist worker: a child run plants one."""

import subprocess
import sys
import uuid
from pathlib import Path

from dev.stack.state import StackState

ROOT = Path(__file__).resolve().parents[2]
# A container with the label the server puts on every sandbox, which nobody removes.
PLANTED = """
import subprocess

def test_leaves_a_container_behind(stack):
    subprocess.run(
        ["docker", "run", "-d", "--name", "{name}", "--label", "opensandbox.io/id={name}",
         "{image}", "sleep", "600"],
        check=True, capture_output=True,
    )
"""


def test_a_leak_in_a_worker_fails_the_run(stack: StackState, tmp_path: Path) -> None:
    name = f"planted-leak-{uuid.uuid4().hex[:8]}"
    image = stack.images["sandbox"]
    planted = tmp_path / "test_planted.py"
    planted.write_text(PLANTED.format(name=name, image=image))
    try:
        # tests.conftest as a plugin brings the stack fixture and the leak check to a file
        # outside tests/; the child's run summary must not replace this run's.
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-n",
                "2",
                "-p",
                "tests.conftest",
                "-p",
                "no:run-summary",
                "-p",
                "no:cacheprovider",
                "--rootdir",
                str(ROOT),
                "-c",
                str(ROOT / "pyproject.toml"),
                str(planted),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    assert "1 passed" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 1, done.stdout
    assert f"container {name}" in done.stdout, done.stdout
