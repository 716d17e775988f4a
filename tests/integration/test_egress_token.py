"""
The egress sidecar's token never reaches a guest, so a guest cannot open its own egress.

Every route to the sidecar passes through the sandbox (docs/egress.rst, egress-routes), so the
backend reads the policy only before the first command. Here the guest's first command replaces
execd with a recorder of its own (``execd_recorder.py``), which relays to a fresh execd and writes
down every byte the backend sends it afterwards; the guest then tries to widen its policy with
whatever token it caught, and sends packets to a listener of ours on the Docker bridge, which
its policy does not allow. Nothing in the test relies on the stand-in: the recorder finds and
replaces whatever execd the sandbox runs.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.providers.common.compat.sdk import ObjectStoragePath, TaskDeferred
from opensandbox import SandboxSync

from dev.stack.state import ServerInfo, runtime
from opensandbox_provider.egress._policy import EGRESS_AUTH_HEADER, EGRESS_PORT
from tests.integration import test_egress, test_operator
from tests.integration.conftest import Sandbox
from tests.integration.test_egress import reach
from tests.integration.test_operator import rebuilt, run_trigger

# The egress tests' listener on the bridge, and the operator tests' operators, whose sandboxes
# are destroyed whatever a test did.
listener = test_egress.listener
operator_on = test_operator.operator_on

RECORDER = Path(__file__).with_name("execd_recorder.py")
RECORDING = "/tmp/recorder"
# The recorder settles for a second before it replaces execd; the rest is starting Python and
# a fresh execd, which took over 30 s once on a machine busy with the whole suite.
REPLACED_WITHIN_S = 90

# Runs in the sandbox: the guest tries to widen its policy to the bridge address with no token,
# a guessed one and every token its recorder caught, and prints each answer's status.
WIDEN = """
import json, re, sys, urllib.error, urllib.request
recording = open(sys.argv[2], "rb").read()
caught = re.findall(rb"(?im)^opensandbox-egress-auth:[ \\t]*([^\\r\\n]+)", recording)
def patch(headers):
    request = urllib.request.Request(
        "http://127.0.0.1:18080/policy",
        data=json.dumps([{"action": "allow", "target": sys.argv[1]}]).encode(),
        headers={"Content-Type": "application/json", **headers},
        method="PATCH",
    )
    try:
        return urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as error:
        return error.code
tokens = [None, b"guessed"] + caught
headers = [{} if t is None else {"OPENSANDBOX-EGRESS-AUTH": t.decode()} for t in tokens]
print(json.dumps([patch(each) for each in headers]))
"""


# Starts the recorder in a session of its own and waits until it is in it: execd kills the
# command's process group once its shell exits, and a recorder that had not yet left the group
# then (a loaded machine is slow to reach setsid) was killed before it wrote a byte.
START_RECORDER = (
    f"mkdir -p {RECORDING} && (setsid python3 {RECORDING}.py {RECORDING} "
    f"> {RECORDING}/log 2>&1 < /dev/null &) && "
    f"until [ -e {RECORDING}/started ]; do sleep 0.05; done"
)


def start_the_recorder(sandbox) -> None:
    """The guest's first command: start the recorder, which replaces execd once it has ended."""
    sandbox.backend.write_file(sandbox.handle, f"{RECORDING}.py", RECORDER.read_bytes())
    started = sandbox.run(START_RECORDER)
    assert started.exit_code == 0, started.stderr


def wait_until_replaced(sandbox) -> None:
    time.sleep(3)
    deadline = time.monotonic() + REPLACED_WITHIN_S
    while sandbox.run(f"test -e {RECORDING}/ready").exit_code != 0:
        assert time.monotonic() < deadline, sandbox.run(f"cat {RECORDING}/log").stdout
        time.sleep(0.5)


# Runs in the sandbox, in a session of its own: every packet of the pod's network namespace,
# appended to a file, until a stop file appears (within a minute, whatever happens).
CAPTURE = """
import os, socket, sys, time
into = sys.argv[1]
capture = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
capture.settimeout(0.2)
end = time.monotonic() + 60
with open(into, "ab") as out:
    open(into + ".started", "w").close()
    while time.monotonic() < end and not os.path.exists(into + ".stop"):
        try:
            out.write(capture.recv(65536))
            out.flush()
        except socket.timeout:
            pass
open(into + ".done", "w").close()
"""
CAPTURE_FILE = "/tmp/capture.bin"


def captured_while(sandbox, action) -> bytes:
    """What a guest's packet capture saw while ``action`` ran."""
    sandbox.backend.write_file(sandbox.handle, "/tmp/capture.py", CAPTURE.encode())
    started = sandbox.run(
        f"(setsid python3 /tmp/capture.py {CAPTURE_FILE} < /dev/null > /dev/null 2>&1 &) && "
        f"until [ -e {CAPTURE_FILE}.started ]; do sleep 0.05; done"
    )
    assert started.exit_code == 0, started.stderr
    action()
    stopped = sandbox.run(
        f"touch {CAPTURE_FILE}.stop && until [ -e {CAPTURE_FILE}.done ]; do sleep 0.05; done"
    )
    assert stopped.exit_code == 0, stopped.stderr
    return sandbox.backend.read_file(sandbox.handle, CAPTURE_FILE, max_bytes=64 * 1024 * 1024)


def recorded(sandbox) -> bytes:
    return sandbox.backend.read_file(
        sandbox.handle, f"{RECORDING}/requests.bin", max_bytes=64 * 1024 * 1024
    )


def header_lines(seen: bytes) -> list[bytes]:
    """Every request header line of the sidecar's token in a recording, whatever its value."""
    return re.findall(rb"(?im)^" + EGRESS_AUTH_HEADER.encode() + rb":[^\r\n]*", seen)


def the_token(server: ServerInfo, handle: str) -> tuple[str, str, dict[str, str]]:
    """The sidecar's token, its endpoint and headers, as any API-key holder can ask for them."""
    outside = SandboxSync.connect(handle, connection_config=server.connection_config())
    try:
        endpoint = outside.get_endpoint(EGRESS_PORT)
    finally:
        outside.close()
    headers = dict(endpoint.headers or {})
    token = next(
        value for name, value in headers.items() if name.lower() == "opensandbox-egress-auth"
    )
    return token, endpoint.endpoint, headers


def test_a_guest_that_replaces_execd_never_receives_the_egress_token_nor_opens_its_egress(
    sandbox_on, dns_nft_server, stack, listener
) -> None:
    sandbox = sandbox_on(dns_nft_server, SandboxSpec())
    token, endpoint, headers = the_token(dns_nft_server, sandbox.handle)
    start_the_recorder(sandbox)
    wait_until_replaced(sandbox)

    # What the backend does after the guest's first command: commands, files, listings.
    widen = shlex.join(["python3", "-c", WIDEN, stack.bridge_ip, f"{RECORDING}/requests.bin"])
    answers = json.loads(sandbox.run(widen).stdout)
    sandbox.backend.write_file(sandbox.handle, "/tmp/after.txt", b"after")
    assert sandbox.backend.read_file(sandbox.handle, "/tmp/after.txt", max_bytes=64) == b"after"
    assert ("after.txt", False) in sandbox.backend.list_directory(sandbox.handle, "/tmp")
    outcomes = reach(sandbox, (stack.bridge_ip, listener.port))

    seen = recorded(sandbox)
    assert b"/files/upload" in seen and b"/command" in seen, "the recorder saw none of it"
    assert token.encode() not in seen
    assert not header_lines(seen)
    # The guest's tries to widen its policy are all refused, and its packets are still dropped.
    assert answers == [401, 401]
    assert outcomes == ["dropped"]
    assert listener.peers == []

    # The guest would have caught the token: the same read the backend made at create, made
    # now by an API-key holder, hands it over. On Docker it is relayed by execd, so the recorder
    # has it; on Kubernetes it goes to the pod's address (through the gateway or not), into the
    # network namespace the guest shares, where a capture of the guest's has it.
    if runtime() == "kubernetes":
        assert token.encode() in captured_while(
            sandbox, lambda: httpx.get(f"http://{endpoint}/policy", headers=headers, timeout=30)
        )
    else:
        httpx.get(f"http://{endpoint}/policy", headers=headers, timeout=30)
        assert token.encode() in recorded(sandbox)


def test_the_operators_end_of_task_path_never_hands_a_guest_the_egress_token(
    operator_on, backend_on, dns_nft_server, tmp_path
) -> None:
    target = tmp_path / "out.txt"
    operator = operator_on(
        dns_nft_server,
        spec=SandboxSpec(),
        deferrable=True,
        poll_interval=0.2,
        files={f"{RECORDING}.py": RECORDER.read_bytes()},
        command=f"echo fetched > /tmp/out.txt && {START_RECORDER}",
        outputs={"/tmp/out.txt": ObjectStoragePath(f"file://{target}")},
    )
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    event = run_trigger(rebuilt(deferral.value.trigger))
    assert (event["status"], event["exit_code"]) == ("ended", 0)
    sandbox = Sandbox(backend_on(dns_nft_server), operator._sandbox_id, dns_nft_server)
    token, _, _ = the_token(dns_nft_server, sandbox.handle)
    wait_until_replaced(sandbox)
    before = len(recorded(sandbox))
    # Kept past the task so that the recording can be read; operator_on destroys it.
    operator._destroy = lambda backend, handle: None

    # Back from the trigger: hold, copy the outputs, read the result.
    assert operator.execute_complete({}, event) == {"exit_code": 0, "stdout": ""}

    assert target.read_text() == "fetched\n"
    seen = recorded(sandbox)
    assert b"/files/download" in seen[before:], "the recorder saw none of the task's end"
    assert token.encode() not in seen
    assert not header_lines(seen)
