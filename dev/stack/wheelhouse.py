"""The stack's own package index: a folder of wheels served over HTTP on the Docker bridge.

Sandboxes reach it by the resolver's ``allowed.test``, so ``@task.opensandbox(requirements=...)``
in the demo and the tests installs from here and no sandbox ever reaches a public index. It is
a plain ``--find-links`` page (``python -m http.server``), listening on the bridge alone.
"""

import socket
import sys
import time

from dev.stack import processes
from dev.stack.engine import BRIDGE_IP
from dev.stack.paths import STACK_DIR
from dev.stack.resolver import ALLOWED_NAME
from dev.stack.wheels import wheel

PORT = 18097
PROCESS_NAME = "wheelhouse"
DIRECTORY = STACK_DIR / "wheelhouse"
START_SECONDS = 10
# The demo's one package: what the operator system-test Dag's decorated function imports.
DEMO_REQUIREMENT = "osb-demo-words==1.0"
_DEMO_SOURCE = '''"""Word statistics, installed from the local stack's package index."""


def letter_counts(words):
    return {word: len(word) for word in words.split()}
'''


def pip_args(host: str = ALLOWED_NAME) -> list[str]:
    """The pip arguments that install from this index and nowhere else."""
    return ["--no-index", "--find-links", f"http://{host}:{PORT}/", "--trusted-host", host]


def ensure_wheelhouse() -> bool:
    """Writes the wheels and serves them unless the index runs. True if this call started it."""
    if processes.find(PROCESS_NAME) is not None:
        return False
    DIRECTORY.mkdir(parents=True, exist_ok=True)
    name, _, version = DEMO_REQUIREMENT.partition("==")
    wheel(DIRECTORY, name, version, {"osb_demo_words": _DEMO_SOURCE})
    argv = [sys.executable, "-m", "http.server", "--bind", BRIDGE_IP, "--directory"]
    processes.start(PROCESS_NAME, [*argv, str(DIRECTORY), str(PORT)])
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            with socket.create_connection((BRIDGE_IP, PORT), timeout=1):
                return True
        except OSError:
            if processes.find(PROCESS_NAME) is None or time.monotonic() > deadline:
                processes.stop(PROCESS_NAME)
                raise RuntimeError(
                    f"The stack's package index did not answer on {BRIDGE_IP}:{PORT}; see "
                    f"{processes.log_file(PROCESS_NAME)}."
                ) from None
            time.sleep(0.2)


def stop_wheelhouse() -> bool:
    return processes.stop(PROCESS_NAME)
