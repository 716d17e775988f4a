"""Readiness, the reverse proxy and unknown routes (docs/execd-wire.rst, wire-readiness, wire-proxy,
wire-routes)."""

import httpx
from opensandbox import SandboxSync

from tests.conformance.wire import ExecdWire


def direct_url(wire: ExecdWire, path: str) -> str:
    """The same host port without the /proxy/44772 prefix the server's endpoint carries."""
    return str(wire.base_url.copy_with(path=path))


def test_ping_answers_200_with_an_empty_body_under_the_proxy_prefix(wire: ExecdWire):
    response = wire.get("/ping")

    assert str(wire.base_url).rstrip("/").endswith("/proxy/44772")
    assert (response.status_code, response.content) == (200, b"")


def test_ping_answers_200_directly_too(wire: ExecdWire):
    response = httpx.get(direct_url(wire, "/ping"), timeout=30)

    assert (response.status_code, response.content) == (200, b"")


def test_the_sdk_sees_the_sandbox_as_healthy(sandbox: SandboxSync):
    assert sandbox.is_healthy()


def test_unknown_routes_get_gins_404_text(wire: ExecdWire):
    unknown = wire.get("/no/such/route")
    wrong_method = wire.client.put("/ping")

    for response in (unknown, wrong_method):
        assert response.status_code == 404
        assert response.headers["content-type"] == "text/plain"
        assert response.text == "404 page not found"


def test_proxy_to_a_port_nobody_listens_on_answers_502_bad_gateway(wire: ExecdWire):
    response = httpx.get(direct_url(wire, "/proxy/18080/policy"), timeout=30)

    assert response.status_code == 502
    assert response.text == "Bad Gateway\n"


def test_proxy_forwards_to_another_port_in_the_sandbox(sandbox: SandboxSync, wire: ExecdWire):
    sandbox.files.write_file("/tmp/www/hello.txt", "served")
    sandbox.commands.run(
        "cd /tmp/www && nohup python3 -m http.server 18081 --bind 127.0.0.1 >/dev/null 2>&1 &",
    )

    response = None
    for _attempt in range(50):
        response = httpx.get(direct_url(wire, "/proxy/18081/hello.txt"), timeout=30)
        if response.status_code == 200:
            break
    assert (response.status_code, response.text) == (200, "served")


def test_commands_and_files_work_through_the_servers_proxy(make_sandbox):
    sandbox = make_sandbox(use_server_proxy=True)

    sandbox.files.write_file("/tmp/via-proxy", "proxied")
    execution = sandbox.commands.run("cat /tmp/via-proxy; echo; echo second")

    assert "/v1/sandboxes/" in sandbox.get_endpoint(44772).endpoint
    assert [message.text for message in execution.logs.stdout] == ["proxied", "second"]
