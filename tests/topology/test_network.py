"""The celery topology's hosts reach the bridge's address and nothing else."""

from __future__ import annotations

import errno
import subprocess
import sys

from dev.airflow_stack import network
from dev.airflow_stack.celery_topology import WORKER_HOSTS
from dev.airflow_stack.running import RunningAirflow
from dev.stack.state import ServerInfo

# Prints "connected" or the errno of the failed connect.
_CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    print("connected")
except OSError as e:
    print(e.errno)
"""


def _connect_from(namespace: str, address: str, port: int) -> str:
    command = ["ip", "netns", "exec", namespace, sys.executable, "-c", _CONNECT, address, str(port)]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def test_a_worker_reaches_the_servers_through_the_bridge_and_nothing_else(
    celery_airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    worker = WORKER_HOSTS[0].namespace
    assert _connect_from(worker, network.BRIDGE_IP, plain_server.port) == "connected"
    # The servers' own address is the namespace's own loopback there, where nothing listens.
    assert _connect_from(worker, plain_server.host, plain_server.port) == str(errno.ECONNREFUSED)
    # No route leaves the bridge's subnet, so a connect elsewhere sends no packet at all.
    docker_bridge = "172.17.0.1"
    assert _connect_from(worker, docker_bridge, plain_server.port) == str(errno.ENETUNREACH)
