"""What the local Airflow is told: its home, its ports and its configuration (as env vars)."""

from __future__ import annotations

import os
import secrets
import socket
from base64 import urlsafe_b64encode
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_DIR = REPO / ".airflow"
SYSTEM_TEST_DAG = REPO / "system_tests" / "example_sandbox_toolset_opensandbox.py"
OPERATOR_DAG_FILE = REPO / "system_tests" / "example_opensandbox_operator.py"
# The Dag files every local Airflow parses: the ones `make demo` runs on any executor.
DEMO_DAG_FILES = (SYSTEM_TEST_DAG, OPERATOR_DAG_FILE)
# The Dag `make demo` runs on the OpenSandboxExecutor too: only an Airflow that has that
# executor can parse it.
EXECUTOR_DAG_FILE = REPO / "system_tests" / "example_opensandbox_executor.py"

# The first port tried when none is asked for: the one Airflow's own docs use, so the
# address looks familiar. Something else may already hold it, so the search moves on.
PREFERRED_PORT = 8080
PORT_SEARCH_SPAN = 100

# Variables inherited from the caller that would change what the local Airflow does: a
# connection or variable from the environment shadows the one the runner stores, and
# pytest's markers switch Airflow into its own unit-test behaviour.
_INHERITED_PREFIXES = ("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_", "PYTEST_", "_AIRFLOW")


def _port_is_free(port: int) -> bool:
    # On every address: an api-server may listen on loopback or on the Docker bridge (one the
    # executor's sandboxes reach), and a port one of them holds is taken for the other too.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def any_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def choose_api_port(requested: int | None) -> int:
    """The port asked for, which must be free, or else the first free one from 8080 up."""
    if requested is not None:
        if not _port_is_free(requested):
            raise SystemExit(
                f"Port {requested} is already in use. Choose another with AIRFLOW_PORT=<port>, "
                "or leave it unset to take the first free port from 8080 up."
            )
        return requested
    return first_free_port(range(PREFERRED_PORT, PREFERRED_PORT + PORT_SEARCH_SPAN))


def first_free_port(ports: Iterable[int]) -> int:
    """The first of ``ports`` that is free, or else any free one."""
    for port in ports:
        if _port_is_free(port):
            return port
    return any_free_port()


def kept_secret(path: Path, make: Callable[[], str]) -> str:
    # Kept with the home so a second start can still use what the first made with it: the
    # connections it encrypted, the database cluster it set a password on.
    if not path.exists():
        path.write_text(make())
        path.chmod(0o600)
    return path.read_text().strip()


@dataclass(frozen=True)
class AirflowSite:
    """One Airflow installation: a home directory and the ports its components use."""

    home: Path
    port: int
    worker_log_port: int
    trigger_log_port: int
    jwt_secret: str
    fernet_key: str
    # Where the api-server listens: loopback, unless a topology's other hosts must reach it.
    host: str = "127.0.0.1"
    # A topology's configuration (executor, database), over the local defaults below.
    settings: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def prepare(
        cls, home: Path, *, port: int | None = None, extra_dags: Sequence[Path] = ()
    ) -> AirflowSite:
        """The site in ``home``, its Dags folder linking the demo's Dags and ``extra_dags``."""
        dags = home / "dags"
        dags.mkdir(parents=True, exist_ok=True)
        for dag_file in (*DEMO_DAG_FILES, *extra_dags):
            link = dags / dag_file.name
            if not link.is_symlink():
                link.symlink_to(dag_file)
        return cls(
            home=home,
            port=choose_api_port(port),
            worker_log_port=any_free_port(),
            trigger_log_port=any_free_port(),
            jwt_secret=kept_secret(home / "jwt-secret", lambda: secrets.token_urlsafe(32)),
            fernet_key=kept_secret(
                home / "fernet-key", lambda: urlsafe_b64encode(secrets.token_bytes(32)).decode()
            ),
        )

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def password_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json.generated"

    def environment(self) -> dict[str, str]:
        inherited = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(_INHERITED_PREFIXES) and key != "AIRFLOW_HOME"
        }
        local = {
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            # The default of 32 idle workers costs about a gigabyte; one Dag needs four at most.
            "AIRFLOW__CORE__PARALLELISM": "4",
            # The connection form's Test button, off by default, is part of what the demo shows.
            "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__FERNET_KEY": self.fernet_key,
            # A viewer too: the Sandboxes view refuses a user without edit rights.
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__API__HOST": self.host,
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            # Every component signs and checks the same tokens, so they must share the secret.
            "AIRFLOW__API_AUTH__JWT_SECRET": self.jwt_secret,
            # Parsed within seconds instead of the default five minutes, so the Dag shows at once.
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.worker_log_port),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.trigger_log_port),
        }
        return inherited | local | dict(self.settings)
