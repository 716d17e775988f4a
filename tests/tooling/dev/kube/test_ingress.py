"""The ingress gateway's route on the local cluster: which servers lead to it, and how."""

import os
import stat

import pytest

from dev.kube import ingress, opensandbox
from tests.tooling.dev.kube.test_opensandbox import EXAMPLE, IMAGES

PLAIN = opensandbox.SERVERS[0]


def test_a_gateway_server_answers_endpoints_as_the_gateway_plus_the_header():
    written = opensandbox.server_config(opensandbox.GATEWAY_SERVER, "key", IMAGES, EXAMPLE)
    assert written["ingress"] == {
        "mode": "gateway",
        "gateway": {"address": ingress.ADDRESS, "route": {"mode": "header"}},
    }
    assert "ingress" not in opensandbox.server_config(PLAIN, "key", IMAGES, EXAMPLE)


def test_only_a_gateway_server_leaves_the_servers_proxy_off():
    # With the proxy on, every call goes through the server whatever its ingress mode.
    assert opensandbox.GATEWAY_SERVER.connection_extra["use_server_proxy"] == "false"
    assert "use_server_proxy" not in PLAIN.connection_extra
    for server in (PLAIN, opensandbox.GATEWAY_SERVER):
        assert server.connection_extra.items() >= opensandbox.SANDBOX_REQUESTS.items()


def test_the_gateway_server_runs_only_when_the_gateway_is_named(monkeypatch):
    monkeypatch.delenv("KUBE_ROUTE", raising=False)
    assert opensandbox.servers_to_run(agent=False, gateway=False) == opensandbox.SERVERS
    both = opensandbox.servers_to_run(agent=False, gateway=True)
    assert both == (*opensandbox.SERVERS, opensandbox.GATEWAY_SERVER)


def test_kube_route_gateway_puts_the_suites_servers_behind_the_gateway(monkeypatch):
    monkeypatch.setenv("KUBE_ROUTE", "gateway")
    suite = opensandbox.servers_to_run(agent=False, gateway=True)[: len(opensandbox.SERVERS)]
    assert [s.name for s in suite] == [s.name for s in opensandbox.SERVERS]
    assert [s.port for s in suite] == [s.port for s in opensandbox.SERVERS]
    assert {s.ingress for s in suite} == {"gateway"}


def test_the_servers_ports_stay_clear_of_each_other_and_the_gateways():
    ports = [server.port for server in opensandbox.EVERY_SERVER]
    assert len(set(ports)) == len(ports)
    assert ingress.PORT not in ports


def test_kube_route_gateway_without_the_gateway_says_what_to_set(monkeypatch):
    monkeypatch.setenv("KUBE_ROUTE", "gateway")
    monkeypatch.delenv("KUBE_INGRESS_BIN", raising=False)
    with pytest.raises(RuntimeError, match="set KUBE_INGRESS_BIN"):
        ingress.configured()


def test_an_unknown_route_is_refused(monkeypatch):
    monkeypatch.setenv("KUBE_ROUTE", "wildcard")
    with pytest.raises(RuntimeError, match="use proxy or gateway"):
        ingress.route()


def test_a_named_gateway_must_be_executable(monkeypatch, tmp_path):
    binary = tmp_path / "ingress"
    binary.write_text("")
    monkeypatch.setenv("KUBE_INGRESS_BIN", str(binary))
    monkeypatch.delenv("KUBE_ROUTE", raising=False)
    with pytest.raises(RuntimeError, match="not an executable file"):
        ingress.configured()
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    assert ingress.configured() == binary


def test_the_gateway_reads_the_clusters_kubeconfig_from_the_environment(tmp_path):
    # Its own flag parser refuses --kubeconfig; knative reads the variable.
    assert not any(arg.startswith("--kubeconfig") for arg in ingress.argv(tmp_path / "i"))
    assert ingress.environment(tmp_path / "k")["KUBECONFIG"] == str(tmp_path / "k")
    assert os.environ.get("KUBECONFIG") != str(tmp_path / "k")
