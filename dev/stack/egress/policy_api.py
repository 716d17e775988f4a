"""The sidecar's HTTP API on :18080, after `policy_server.go`
(docs/execd-wire.rst, wire-egress-api, wire-egress-get, wire-egress-patch, wire-egress-delete)."""

from __future__ import annotations

import hmac
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import nft
import policy
from live_policy import LivePolicy

AUTH_HEADER = "OPENSANDBOX-EGRESS-AUTH"
# `readPolicyRequestBody` reads at most 1 MiB.
MAX_BODY_BYTES = 1 << 20
# `DefaultMaxEgressRules`.
MAX_RULES = 4096
RESET_REASON = "policy reset to default deny-all"
# Go's json.Encoder escapes these even inside strings; reproduced so bodies match byte for byte.
_GO_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _go_json(payload: dict[str, object]) -> bytes:
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    for char, escape in _GO_JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return (text + "\n").encode()


class PolicyAPIServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, live: LivePolicy, token: str) -> None:
        super().__init__(("0.0.0.0", port), PolicyAPIHandler)
        self.live = live
        self.token = token


class PolicyAPIHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: PolicyAPIServer

    def do_GET(self) -> None:
        self._route()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _route(self) -> None:
        path = urlsplit(self.path).path
        body = self._read_body()
        if path == "/healthz":
            # Ready only once the redirect (and the filter) are in place: main starts this last.
            self._send(200, b"ok", "text/plain; charset=utf-8")
        elif path != "/policy":
            self._text(404, "404 page not found")
        elif not self._authorized():
            self._text(401, "unauthorized")
        else:
            self._policy(body)

    def _policy(self, body: str) -> None:
        live = self.server.live
        with live.lock:
            try:
                if self.command == "GET":
                    payload = self._status(live.policy, policy=live.policy.to_json())
                elif self.command == "PATCH":
                    payload = self._patch(live, body)
                elif self.command == "DELETE":
                    payload = self._delete(live, body)
                else:
                    payload = self._replace(live, body)
            except HTTPError as exc:
                self._text(exc.status, str(exc))
                return
        self._send(200, _go_json(payload), "application/json")

    def _status(self, current: policy.Policy, **extra: object) -> dict[str, object]:
        # `policyStatusResponse`: every field is omitempty, in this order.
        payload = {
            "status": "ok",
            "mode": current.mode,
            "enforcementMode": self.server.live.enforcement_mode,
        }
        payload.update(extra)
        return payload

    def _patch(self, live: LivePolicy, body: str) -> dict[str, object]:
        # `handlePatch` (docs/execd-wire.rst, wire-egress-patch).
        if not body:
            raise HTTPError(400, "empty body")
        try:
            rules = policy.parse_rules(body)
        except policy.PolicyError as exc:
            raise HTTPError(400, f"invalid patch rules: {exc}") from exc
        if not rules:
            raise HTTPError(400, "invalid patch rules: empty array")
        try:
            new = policy.patched(live.policy, rules)
        except policy.PolicyError as exc:
            raise HTTPError(400, f"invalid merged policy: {exc}") from exc
        self._commit(live, new)
        return self._status(new)

    def _delete(self, live: LivePolicy, body: str) -> dict[str, object]:
        # `handleDelete` (docs/execd-wire.rst, wire-egress-delete).
        if not body:
            raise HTTPError(400, "empty body")
        try:
            targets = policy.parse_targets(body)
        except policy.PolicyError as exc:
            raise HTTPError(400, f"invalid delete targets: {exc}") from exc
        if not targets:
            raise HTTPError(400, "invalid delete targets: empty array")
        new, removed = policy.without_targets(live.policy, targets)
        if not removed:
            return self._status(live.policy, reason="no matching targets found")
        self._commit(live, new)
        return self._status(new)

    def _replace(self, live: LivePolicy, body: str) -> dict[str, object]:
        # POST and PUT replace the whole policy (`handlePost`); the SDK never sends them.
        if not body:
            self._commit(live, policy.Policy())
            return {"status": "ok", "mode": "deny_all", "reason": RESET_REASON}
        try:
            new = policy.parse_policy(body)
        except policy.PolicyError as exc:
            raise HTTPError(400, f"invalid policy: {exc}") from exc
        self._commit(live, new)
        return self._status(new)

    def _commit(self, live: LivePolicy, new: policy.Policy) -> None:
        if MAX_RULES and len(new.rules) > MAX_RULES:
            count = len(new.rules)
            raise HTTPError(413, f"egress rule total count {count} exceeds limit {MAX_RULES}")
        try:
            live.commit(new)
        except nft.NftError as exc:
            raise HTTPError(500, f"failed to apply nftables policy: {exc}") from exc

    def _authorized(self) -> bool:
        # Checked only when a token is configured, with a constant-time comparison
        # (docs/execd-wire.rst, wire-egress-api).
        token = self.server.token
        provided = self.headers.get(AUTH_HEADER, "")
        return not token or hmac.compare_digest(provided.encode(), token.encode())

    def _read_body(self) -> str:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        return raw[:MAX_BODY_BYTES].decode("utf-8", "replace").strip()

    def _text(self, status: int, message: str) -> None:
        # Go's http.Error: text/plain, nosniff, and the message plus a newline.
        self._send(status, f"{message}\n".encode(), "text/plain; charset=utf-8", nosniff=True)

    def _send(self, status: int, body: bytes, content_type: str, *, nosniff: bool = False) -> None:
        # Go's net/http sends no Server header.
        self.log_request(status)
        self.send_response_only(status)
        self.send_header("Date", self.date_time_string())
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if nosniff:
            self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)
