"""
A hostile guest's replacement for execd, run inside a sandbox by the egress-token tests.

Started in the background by a command, it waits for that command's stream to end, then
does what a guest that is root in its own container can: it finds the process listening on
execd's port (execd, whatever its binary), kills it, starts a fresh execd from the same
command line on another port, and takes execd's port itself. From then on it relays every
connection to the fresh execd, so the backend keeps working, and appends every byte a client
sends to a file: whatever reaches "execd" from then on, headers and all, is written down.
Stdlib only: the sandbox's python3 runs it.

Usage: python3 execd_recorder.py <recording directory>
"""

import os
import signal
import socket
import sys
import threading
import time

EXECD_PORT = 44772
FRESH_PORT = 44773
# Long enough for execd to finish the stream of the command that started this.
SETTLE_S = 1.0
START_S = 30.0


def listener_pid(port):
    """The process in this container that holds a listening socket on ``port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # State 0A is LISTEN; the local address ends in the port, in hex.
            if fields[3] == "0A" and fields[1].endswith(f":{port:04X}"):
                inodes.add(fields[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(pid)
        except OSError:
            continue
    raise SystemExit(f"nothing in this container listens on port {port}")


def read_nul_separated(path):
    with open(path, "rb") as handle:
        return [part for part in handle.read().split(b"\0") if part]


def replace_execd(directory):
    pid = listener_pid(EXECD_PORT)
    argv = read_nul_separated(f"/proc/{pid}/cmdline")
    executable = os.readlink(f"/proc/{pid}/exe")
    env = dict(
        item.split(b"=", 1) for item in read_nul_separated(f"/proc/{pid}/environ") if b"=" in item
    )
    os.kill(pid, signal.SIGKILL)
    log = open(os.path.join(directory, "fresh-execd.log"), "ab")
    child = os.fork()
    if child == 0:
        os.setsid()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        os.execve(executable, [*argv, b"--port=%d" % FRESH_PORT], env)
    deadline = time.monotonic() + START_S
    while True:
        try:
            return socket.create_server(("0.0.0.0", EXECD_PORT))
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def upstream():
    deadline = time.monotonic() + START_S
    while True:
        try:
            return socket.create_connection(("127.0.0.1", FRESH_PORT), timeout=START_S)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def pipe(source, sink, record=None):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            if record is not None:
                record(data)
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    directory = sys.argv[1]
    # In its own session by now (setsid ran before Python): the command that started it may end.
    open(os.path.join(directory, "started"), "w").close()
    time.sleep(SETTLE_S)
    server = replace_execd(directory)
    lock = threading.Lock()
    recording = open(os.path.join(directory, "requests.bin"), "ab", buffering=0)

    def record(data):
        with lock:
            recording.write(data)

    open(os.path.join(directory, "ready"), "w").close()
    while True:
        client, _ = server.accept()
        try:
            to_execd = upstream()
        except OSError:
            client.close()
            continue
        to_execd.settimeout(None)
        threading.Thread(target=pipe, args=(client, to_execd, record), daemon=True).start()
        threading.Thread(target=pipe, args=(to_execd, client), daemon=True).start()


if __name__ == "__main__":
    main()
