"""The /proxy/{port}/ reverse proxy to a port inside the sandbox
(docs/execd-wire.rst, wire-proxy)."""

import http.client

from exchange import Exchange

_HOP_BY_HOP = set(
    "connection keep-alive proxy-authenticate proxy-authorization proxy-connection te trailer "
    "trailers transfer-encoding upgrade".split()
)


def reverse_proxy(exchange: Exchange, port: str, path: str) -> None:
    """/proxy/{port}/{rest} is forwarded to 127.0.0.1:{port}/{rest}; failure is a 502
    (docs/execd-wire.rst, wire-proxy)."""
    headers = {
        name: value for name, value in exchange.headers.items() if name.lower() not in _HOP_BY_HOP
    }
    headers["X-Forwarded-For"] = exchange.handler.client_address[0]
    headers["X-Forwarded-Proto"] = "http"
    target = path + (f"?{exchange.raw_query}" if exchange.raw_query else "")
    upstream = None
    try:
        upstream = http.client.HTTPConnection("127.0.0.1", int(port), timeout=600)
        upstream.request(exchange.method, target, body=exchange.body() or None, headers=headers)
        response = upstream.getresponse()
    except (OSError, ValueError, http.client.HTTPException):
        if upstream is not None:
            upstream.close()
        exchange.respond_text(502, "Bad Gateway")
        return
    try:
        relay(exchange, response)
    finally:
        upstream.close()


def relay(exchange: Exchange, response: http.client.HTTPResponse) -> None:
    headers = {
        name: value
        for name, value in response.getheaders()
        if name.lower() not in _HOP_BY_HOP | {"content-length"}
    }
    if response.getheader("Content-Length") is not None:
        exchange.respond(response.status, response.read(), headers)
        return
    # An event stream, or another body of unknown length, is relayed as it arrives.
    exchange.start_chunked(response.status, headers)
    try:
        while chunk := response.read1(65536):
            exchange.write_chunk(chunk)
    except (OSError, http.client.HTTPException):
        exchange.close_connection()
        return
    exchange.end_chunked()
