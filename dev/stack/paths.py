"""Where the stack keeps its files: everything it creates lives under ``.stack/`` (git-ignored)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STACK_DIR = REPO / ".stack"
STATE_FILE = STACK_DIR / "state.json"
LOCK_FILE = STACK_DIR / "lock"
API_KEY_FILE = STACK_DIR / "api-key"
CACHE_DIR = STACK_DIR / "cache"
LOG_DIR = STACK_DIR / "logs"
RUN_DIR = STACK_DIR / "run"
SERVER_VENV = STACK_DIR / "server-venv"
# The one host directory the servers let a sandbox mount (their [storage] allowed_host_paths).
HOST_MOUNTS_DIR = STACK_DIR / "host-mounts"
SERVER_REQUIREMENTS = REPO / "requirements" / "stack-server.txt"
STACK_SOURCES = Path(__file__).resolve().parent
