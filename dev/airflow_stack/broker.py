"""The celery topology's broker: a Redis of its own, config and data in the Airflow home.

Debian's ``redis-server`` provides the program; this instance listens on the bridge's address
and a port of its own, apart from any other Redis on the machine, and asks for a password.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from dev.airflow_stack import components

NAME = "redis"
READY_TIMEOUT = 30.0


@dataclass(frozen=True)
class Broker:
    home: Path
    host: str
    port: int
    password: str

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@{self.host}:{self.port}/0"

    def start(self) -> None:
        program = shutil.which("redis-server")
        if program is None:
            raise RuntimeError(
                "Redis is not installed. Install Debian's `redis-server` package "
                "(apt-get install redis-server) and start the celery topology again."
            )
        directory = self.home / "redis"
        directory.mkdir(exist_ok=True)
        config = directory / "redis.conf"
        # Only queued messages live here, and a restarted topology starts with none.
        config.write_text(
            f"bind {self.host}\nport {self.port}\nrequirepass {self.password}\n"
            f'dir {directory}\nsave ""\nappendonly no\ndaemonize no\nlogfile ""\n'
        )
        config.chmod(0o600)  # it holds the password
        components.launch(self.home, NAME, [program, str(config)], {})
        self._wait_ready()

    def _wait_ready(self) -> None:
        client = redis.Redis(host=self.host, port=self.port, password=self.password)
        deadline = time.monotonic() + READY_TIMEOUT
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.RedisError as e:
                    if components.pid(self.home, NAME) is None or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"Redis did not answer on {self.host}:{self.port} ({e}); its "
                            f"output is {components.log_file(self.home, NAME)}."
                        ) from None
                    time.sleep(0.2)
        finally:
            client.close()
