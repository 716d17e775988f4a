"""Which handler answers a request (docs/execd-wire.rst, wire-routes), the /proxy/ prefix in front
of them all, gin's recovery."""

import re
import traceback

from command_control import command_logs, command_status, interrupt_command
from commands import run_command
from directories import create_directories, delete_directories, list_directory
from download import download_file
from exchange import ApiError, Exchange
from file_operations import delete_files, files_info, move_files
from permissions import set_permissions
from proxy import reverse_proxy
from replace import replace_contents
from search import search_files
from stall import STALL
from upload import upload_files


def ping(exchange: Exchange) -> None:
    """200 with an empty body (docs/execd-wire.rst, wire-readiness); held while the test-only
    silent stall has a stream open."""
    STALL.hold_ping()
    exchange.respond_empty()


ROUTES = {
    ("GET", "/ping"): ping,
    ("POST", "/command"): run_command,
    ("DELETE", "/command"): interrupt_command,
    ("POST", "/files/upload"): upload_files,
    ("GET", "/files/download"): download_file,
    ("GET", "/files/info"): files_info,
    ("DELETE", "/files"): delete_files,
    ("POST", "/files/mv"): move_files,
    ("GET", "/files/search"): search_files,
    ("POST", "/files/permissions"): set_permissions,
    ("POST", "/files/replace"): replace_contents,
    ("POST", "/directories"): create_directories,
    ("GET", "/directories/list"): list_directory,
    ("DELETE", "/directories"): delete_directories,
}

PATTERN_ROUTES = [
    ("GET", re.compile(r"/command/status/([^/]+)"), command_status),
    ("GET", re.compile(r"/command/([^/]+)/logs"), command_logs),
]


def dispatch(exchange: Exchange) -> None:
    try:
        route(exchange)
    except ApiError as error:
        exchange.respond_error(error)
    except Exception:
        # gin.Recovery: an unexpected failure is an empty 500, and the server carries on.
        traceback.print_exc()
        if exchange.responded:
            exchange.close_connection()
        else:
            exchange.respond(500)


def route(exchange: Exchange) -> None:
    if exchange.path.startswith("/proxy/"):
        route_proxy(exchange)
        return
    handler = ROUTES.get((exchange.method, exchange.path))
    if handler is not None:
        handler(exchange)
        return
    for method, pattern, pattern_handler in PATTERN_ROUTES:
        match = pattern.fullmatch(exchange.path)
        if match and method == exchange.method:
            pattern_handler(exchange, *match.groups())
            return
    exchange.respond_not_found()


def route_proxy(exchange: Exchange) -> None:
    """execd's ProxyMiddleware runs before every route (docs/execd-wire.rst, wire-proxy)."""
    port, _, rest = exchange.path[len("/proxy/") :].partition("/")
    if not port:
        exchange.respond_text(400, "port is required")
        return
    path = "/" + rest
    if port == str(exchange.handler.server.server_address[1]):
        # execd proxies its own port to itself over loopback; answering in-process is the same
        # exchange (Go's reverse proxy relays event streams unbuffered).
        exchange.path = path
        route(exchange)
        return
    reverse_proxy(exchange, port, path)
