"""A stand-in for OpenSandbox's execd daemon, for the local test stack.

It serves every execd endpoint that the opensandbox SDK's sync client calls and reproduces execd's
wire behaviour as this project documents it; a comment such as "(docs/execd-wire.rst, wire-lines)"
names the section of that page whose fact the code beside it reproduces. It is stdlib
only because it runs inside the sandbox, where the image's python3 is all there is. The server
copies exactly one file, /execd, out of the execd image into every sandbox, so the image build
zips this directory into one executable file (a zipapp); its modules import each other by their
plain names, which also lets `python3 dev/stack/execd` run the directory as it is.

Listens on 0.0.0.0:44772 (IPv4 only, as execd). Flags: `--port` (execd's own flag) and `--address`
(development runs bind loopback instead of every interface).

Environment, read from execd's own environment (the sandbox's env, set when it is created):
  EXECD_ENVS              a file of KEY=VALUE lines merged into every command's environment,
                          re-read for every command (bootstrap.sh sets it).
  TMPDIR                  where command output files go (execd uses os.TempDir()).
  OPENSANDBOX_TEST_STALL  TEST-ONLY, not an execd feature. Makes every command stream stall so that
                          a stalled stream can be produced on demand; the command itself runs as
                          usual and its status and logs stay readable.
                            silent     the stream stops after its first event (init): no output,
                                       no terminal event, no heartbeats; the connection is held
                                       open until the client hangs up, and while it is, a ping
                                       goes unanswered too, as from a frozen execd.
                            heartbeat  after init only the 3-second heartbeats keep arriving; no
                                       output and no terminal event ever do.
                          Unset or empty: no stall. Any other value stops execd at start-up.
"""

import argparse
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from exchange import Exchange
from routes import dispatch
from stall import STALL

EXECD_PORT = 44772  # (docs/execd-wire.rst, wire-routes)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked event streams, as Go's net/http
    # Go sets TCP_NODELAY on every connection; without it the headers and the body of one answer
    # wait out a delayed ACK (about 40 ms each) and every call looks slower than against execd.
    disable_nagle_algorithm = True

    def handle_request(self) -> None:
        url = urlsplit(self.path)
        exchange = Exchange(self, url.path, url.query)
        dispatch(exchange)
        exchange.body()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = handle_request


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # Commands may run concurrently; the stdlib's backlog of 5 is too small for that
    # (docs/execd-wire.rst, wire-launch).
    request_queue_size = 128


def main() -> None:
    parser = argparse.ArgumentParser(description="Stand-in for OpenSandbox's execd (tests only).")
    parser.add_argument("--port", type=int, default=EXECD_PORT)
    parser.add_argument("--address", default="0.0.0.0")
    arguments = parser.parse_args()
    if problem := STALL.problem():
        sys.exit(problem)
    Server((arguments.address, arguments.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
