"""The celery topology's metadata database: a PostgreSQL cluster of its own in the Airflow home.

Debian's ``postgresql`` package provides the programs; the machine's own cluster and service
are left alone. The cluster is made with ``initdb`` as the ``postgres`` user (the server refuses
to run as root), and its ``postgres`` process is started by PID like every other component, on
the bridge's address and a port of its own, with no Unix socket.
"""

from __future__ import annotations

import glob
import hashlib
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg2

from dev.airflow_stack import components

NAME = "postgres"
OS_USER = "postgres"
DATABASE = "airflow"
ROLE = "airflow"
# Measured: the server accepts connections about a second after launch; a loaded two-core
# machine may take many times that.
READY_TIMEOUT = 60.0


def programs() -> Path | None:
    """The directory of the newest installed PostgreSQL's programs, which Debian keeps off PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_major_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _major_version(initdb: str) -> int:
    return int(Path(initdb).parts[-3])


@dataclass(frozen=True)
class MetadataDatabase:
    home: Path
    host: str
    port: int
    password: str

    @property
    def cluster_root(self) -> Path:
        """
        Where the cluster lives: outside the Airflow home, since the ``postgres`` user must
        reach it and a checkout's parent folders may be closed to other users (a fresh
        ``mktemp -d`` is), in the system's temporary folder, one per home.
        """
        digest = hashlib.sha256(str(self.home.resolve()).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"opensandbox-provider-postgres-{digest}"

    @property
    def data_dir(self) -> Path:
        return self.cluster_root / "data"

    @property
    def _made_for_this_home(self) -> Path:
        # A home made afresh has no such mark, so it never meets a cluster of an earlier home
        # (whose password it does not know).
        return self.home / "postgres-cluster"

    @property
    def sqlalchemy_url(self) -> str:
        return f"postgresql+psycopg2://{ROLE}:{self.password}@{self.host}:{self.port}/{DATABASE}"

    def start(self, subnet: str) -> None:
        """Make the cluster on first use, start it, wait for it and create Airflow's database."""
        bin_dir = programs()
        if bin_dir is None:
            raise RuntimeError(
                "PostgreSQL is not installed. Install Debian's `postgresql` package "
                "(apt-get install postgresql) and start the celery topology again."
            )
        if not (self.data_dir / "PG_VERSION").exists() or not self._made_for_this_home.exists():
            self._init(bin_dir, subnet)
            self._made_for_this_home.write_text(f"{self.data_dir}\n")
        server = [str(bin_dir / "postgres"), "-D", str(self.data_dir)]
        # A throwaway development database: durability is traded for the speed of a migration
        # on a loaded machine.
        settings = {
            "listen_addresses": self.host,
            "port": str(self.port),
            "unix_socket_directories": "",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        options = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        components.launch(self.home, NAME, [*server, *options], {}, user=OS_USER)
        self._create_database()

    def _init(self, bin_dir: Path, subnet: str) -> None:
        shutil.rmtree(self.cluster_root, ignore_errors=True)
        self.cluster_root.mkdir(mode=0o700)
        shutil.chown(self.cluster_root, OS_USER, OS_USER)
        self.data_dir.mkdir(mode=0o700)
        shutil.chown(self.data_dir, OS_USER, OS_USER)
        password_file = self.cluster_root / "password"
        password_file.write_text(self.password + "\n")
        shutil.chown(password_file, OS_USER, OS_USER)
        password_file.chmod(0o600)
        try:
            result = subprocess.run(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    ROLE,
                    f"--pwfile={password_file}",
                    "--auth=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                ],
                user=OS_USER,
                group=OS_USER,
                cwd=self.data_dir,
                capture_output=True,
                text=True,
            )
        finally:
            password_file.unlink()
        if result.returncode:
            raise RuntimeError(
                f"initdb failed for {self.data_dir}:\n{result.stdout}{result.stderr}"
            )
        with (self.data_dir / "pg_hba.conf").open("a") as rules:
            rules.write(f"host all {ROLE} {subnet} scram-sha-256\n")

    def _connect(self, database: str) -> psycopg2.extensions.connection:
        return psycopg2.connect(
            host=self.host,
            port=self.port,
            user=ROLE,
            password=self.password,
            dbname=database,
            connect_timeout=5,
        )

    def _create_database(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                connection = self._connect("postgres")
                break
            except psycopg2.OperationalError as e:
                if components.pid(self.home, NAME) is None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"PostgreSQL did not accept connections on {self.host}:{self.port} "
                        f"({e}); its output is {components.log_file(self.home, NAME)}."
                    ) from None
                time.sleep(0.2)
        connection.autocommit = True
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
                if cursor.fetchone() is None:
                    cursor.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        finally:
            connection.close()
