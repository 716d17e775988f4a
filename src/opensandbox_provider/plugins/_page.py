"""The Sandboxes page as HTML: one table per server, rendered on the api-server, no bundle.

Everything shown comes from a server's answer or a Dag author's ids, so all of it is escaped.
The page runs in the UI's frame; a link to a task instance opens it in the UI itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from opensandbox_provider._identity import TaskInstanceIdentity
    from opensandbox_provider.hooks._sandboxes import SandboxSummary
    from opensandbox_provider.plugins._app import ServerSandboxes

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1rem; color: #1a202c; }
h1 { font-size: 1.3rem; } h2 { font-size: 1.05rem; margin-top: 1.5rem; }
table { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
th, td { text-align: left; padding: 0.35rem 0.6rem; border-bottom: 1px solid #e2e8f0; }
th { background: #f7fafc; } code { font-size: 0.85rem; }
.error { color: #c53030; } .muted { color: #718096; }
button { cursor: pointer; background: #c53030; color: white; border: 0; border-radius: 4px;
         padding: 0.2rem 0.7rem; }
"""

# Posts the kill with the header the app requires, then shows the page again. The UI frames
# the page in a sandboxed iframe where confirm() is refused, so the button asks in two clicks,
# and where the top page cannot be navigated: a task instance's link moves the UI's own router
# instead (same origin), as a click in the UI would.
_SCRIPT = """
document.querySelectorAll("a[data-ui-path]").forEach((link) => {
  link.addEventListener("click", (event) => {
    if (window.parent === window) return;
    event.preventDefault();
    window.parent.history.pushState({}, "", link.dataset.uiPath);
    window.parent.dispatchEvent(new PopStateEvent("popstate"));
  });
});
document.querySelectorAll("button[data-kill]").forEach((button) => {
  button.addEventListener("click", async () => {
    if (!button.dataset.armed) {
      button.dataset.armed = "yes";
      button.textContent = "Confirm kill";
      return;
    }
    const answer = await fetch(button.dataset.kill, {
      method: "POST", credentials: "same-origin", headers: {"X-OpenSandbox-Action": "kill"},
    });
    if (answer.ok) { location.reload(); return; }
    const body = await answer.json().catch(() => ({}));
    document.getElementById("message").textContent = body.detail || answer.statusText;
  });
});
"""


def render_page(
    servers: list[ServerSandboxes], filters: dict[str, Any], *, airflow_root: str
) -> str:
    now = datetime.now(UTC)
    scope = (
        "of " + ", ".join(f"{name} {escape(str(value))}" for name, value in filters.items())
        if filters
        else "made by Airflow tasks through this provider"
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Sandboxes</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Sandboxes {scope}</h1>",
        "<p id='message' class='error' role='alert'></p>",
    ]
    if not servers:
        parts.append("<p class='muted'>No connection of type opensandbox is defined.</p>")
    for server in servers:
        parts.append(_server_section(server, now, airflow_root))
    parts.append(f"<script>{_SCRIPT}</script></body></html>")
    return "".join(parts)


def _server_section(server: ServerSandboxes, now: datetime, airflow_root: str) -> str:
    where = f" ({escape(server.server)})" if server.server else ""
    heading = (
        "<h2>A connection you may not read</h2>"
        if server.conn_id is None
        else f"<h2>Connection <code>{escape(server.conn_id)}</code>{where}</h2>"
    )
    if server.error is not None:
        return f"{heading}<p class='error'>Could not list its sandboxes: {escape(server.error)}</p>"
    if not server.sandboxes:
        return f"{heading}<p class='muted'>No sandbox.</p>"
    header = "".join(
        f"<th>{name}</th>"
        for name in ("Sandbox", "State", "Image", "Task instance", "Try", "Age", "Lease ends", "")
    )
    rows = "".join(_row(s, now, airflow_root) for s in server.sandboxes)
    return f"{heading}<table><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>"


def _row(sandbox: SandboxSummary, now: datetime, airflow_root: str) -> str:
    identity = sandbox.identity
    kill = f"api/sandboxes/{quote(sandbox.id, safe='')}/kill"
    cells = [
        f"<code>{escape(sandbox.id)}</code>",
        _state(sandbox, now),
        escape(sandbox.image or "a snapshot"),
        _task_instance(identity, airflow_root),
        "" if identity is None or identity.try_number is None else str(identity.try_number),
        _duration(now - sandbox.created_at),
        "never" if sandbox.expires_at is None else _until(sandbox.expires_at, now),
        f"<button data-kill='{escape(kill)}' data-sandbox='{escape(sandbox.id)}'>Kill</button>",
    ]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _state(sandbox: SandboxSummary, now: datetime) -> str:
    """The server's state, and that its task kept it, for as long as it is kept."""
    if sandbox.kept_until is None or sandbox.kept_until <= now:
        return escape(sandbox.state)
    return f"{escape(sandbox.state)}, kept (may go {_until(sandbox.kept_until, now)})"


def _task_instance(identity: TaskInstanceIdentity | None, airflow_root: str) -> str:
    if identity is None:
        return "<span class='muted'>none (made outside a task)</span>"
    path = "/".join(
        quote(part, safe="")
        for part in ("dags", identity.dag_id, "runs", identity.run_id, "tasks", identity.task_id)
    )
    label = f"{identity.dag_id} / {identity.run_id} / {identity.task_id}"
    if identity.map_index >= 0:
        path += f"/mapped/{identity.map_index}"
        label += f" [{identity.map_index}]"
    url = escape(f"{airflow_root}/{path}")
    return f"<a href='{url}' data-ui-path='{url}'>{escape(label)}</a>"


def _until(moment: datetime, now: datetime) -> str:
    left = moment - now
    return "passed" if left.total_seconds() <= 0 else f"in {_duration(left)}"


def _duration(span: Any) -> str:
    seconds = max(0, int(span.total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
