"""agent-sandbox on the local cluster: its CRDs, its controller's flags and its server's config."""

import os
import tomllib

import pytest

from dev.kube import agent_sandbox, config, opensandbox
from tests.tooling.dev.kube.test_opensandbox import EXAMPLE, IMAGES

SERVER = opensandbox.AGENT_SANDBOX_SERVER

# A CRD as the repository ships it: converted between its versions by the controller's webhook.
CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sandboxes.agents.x-k8s.io
spec:
  group: agents.x-k8s.io
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: agent-sandbox-webhook-service, namespace: agent-sandbox-system}
  versions: [{name: v1beta1, served: true, storage: true}]
"""


def test_the_agent_sandbox_server_runs_its_sandboxes_as_agent_sandbox_resources():
    written = opensandbox.server_config(SERVER, "key", IMAGES, EXAMPLE)
    assert written["kubernetes"]["workload_provider"] == "agent-sandbox"
    assert written["kubernetes"]["namespace"] == opensandbox.NAMESPACE
    assert written["server"]["port"] == SERVER.port
    assert "egress" not in written
    assert tomllib.loads(config.to_toml(written)) == written


def test_the_batchsandbox_servers_keep_the_batchsandbox_workload():
    for server in opensandbox.SERVERS:
        written = opensandbox.server_config(server, "key", IMAGES, EXAMPLE)
        assert written["kubernetes"]["workload_provider"] == "batchsandbox"


def test_the_agent_sandbox_server_takes_the_next_free_port():
    ports = [server.port for server in opensandbox.SERVERS]
    assert SERVER.port == max(ports) + 1
    assert SERVER.name not in {server.name for server in opensandbox.SERVERS}


def test_the_crds_are_applied_without_the_webhook_conversion(tmp_path):
    (tmp_path / "agents.x-k8s.io_sandboxes.yaml").write_text(f"---\n{CRD}---\n")
    (tmp_path / "kustomization.yaml").write_text("kind: Kustomization\nresources: []\n")
    applied = agent_sandbox.crds(tmp_path)
    assert applied["kind"] == "List"
    [crd] = applied["items"]
    assert crd["metadata"]["name"] == "sandboxes.agents.x-k8s.io"
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert crd["spec"]["versions"] == [{"name": "v1beta1", "served": True, "storage": True}]


def test_the_controller_runs_without_its_webhook_or_leader_election(tmp_path):
    argv = agent_sandbox.controller_argv(tmp_path / "controller", tmp_path / "admin.kubeconfig")
    assert argv[0] == str(tmp_path / "controller")
    assert f"--kubeconfig={tmp_path / 'admin.kubeconfig'}" in argv
    assert "--enable-webhook=false" in argv
    assert "--leader-elect=false" in argv
    assert "--metrics-bind-address=0" in argv
    assert "--health-probe-bind-address=127.0.0.1:18182" in argv


def test_without_either_variable_there_is_no_agent_sandbox(monkeypatch):
    monkeypatch.delenv("AGENT_SANDBOX_CONTROLLER_BIN", raising=False)
    monkeypatch.delenv("AGENT_SANDBOX_CRDS_DIR", raising=False)
    assert agent_sandbox.configured() is None


def test_one_variable_without_the_other_says_what_to_set(tmp_path, monkeypatch):
    (tmp_path / "agents.x-k8s.io_sandboxes.yaml").write_text(CRD)
    monkeypatch.delenv("AGENT_SANDBOX_CONTROLLER_BIN", raising=False)
    monkeypatch.setenv("AGENT_SANDBOX_CRDS_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="Set AGENT_SANDBOX_CONTROLLER_BIN"):
        agent_sandbox.configured()


def _controller(folder):
    """An executable file standing for the controller's binary."""
    controller = folder / "controller"
    controller.write_text("")
    os.chmod(controller, 0o755)
    return controller


def test_a_crd_folder_without_crds_is_refused(tmp_path, monkeypatch):
    controller = _controller(tmp_path)
    monkeypatch.setenv("AGENT_SANDBOX_CONTROLLER_BIN", str(controller))
    monkeypatch.setenv("AGENT_SANDBOX_CRDS_DIR", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match="Set AGENT_SANDBOX_CRDS_DIR"):
        agent_sandbox.configured()


def test_both_variables_name_the_controller_and_its_crds(tmp_path, monkeypatch):
    controller = _controller(tmp_path)
    (tmp_path / "agents.x-k8s.io_sandboxes.yaml").write_text(CRD)
    monkeypatch.setenv("AGENT_SANDBOX_CONTROLLER_BIN", str(controller))
    monkeypatch.setenv("AGENT_SANDBOX_CRDS_DIR", str(tmp_path))
    assert agent_sandbox.configured() == (controller, tmp_path)


class Processes:
    """The process table as status reads it: every process running as ``pid``, or none."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid

    def find(self, name: str) -> "Processes | None":
        return self if self.pid else None

    def log_file(self, name: str) -> str:
        return f"{name}.log"


def test_status_says_once_that_agent_sandbox_is_not_running(monkeypatch):
    monkeypatch.setattr(opensandbox, "PROCESSES", Processes(None))
    monkeypatch.setattr(opensandbox.api, "ready", lambda: False)
    lines = opensandbox.status().splitlines()
    assert [line for line in lines if "agent-sandbox" in line] == [
        "agent-sandbox: not running (`up` starts its controller and server only when "
        "AGENT_SANDBOX_CONTROLLER_BIN and AGENT_SANDBOX_CRDS_DIR are set)"
    ]
    assert sum(line.startswith("server ") for line in lines) == len(opensandbox.SERVERS)


def test_status_lists_the_agent_sandbox_controller_and_server_when_it_runs(monkeypatch):
    monkeypatch.setattr(opensandbox, "PROCESSES", Processes(42))
    monkeypatch.setattr(opensandbox.api, "ready", lambda: False)
    status = opensandbox.status()
    assert f"agent-sandbox-controller ({agent_sandbox.CONTROLLER_HEALTH}): pid 42" in status
    assert f"server agent-sandbox (http://127.0.0.1:{SERVER.port}): pid 42" in status
