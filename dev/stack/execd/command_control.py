"""A command after its start: status, background logs and interrupt
(docs/execd-wire.rst, wire-status, wire-logs, wire-interrupt)."""

from command_records import COMMANDS
from exchange import INVALID_REQUEST_BODY, ApiError, Exchange, bad_request, runtime_error
from go_encoding import go_errno_text, go_parse_int, go_path_error
from process_groups import terminate_group


def command_status(exchange: Exchange, command_id: str) -> None:
    """An unknown id is a 404 whose code is INVALID_REQUEST_BODY
    (docs/execd-wire.rst, wire-status)."""
    record = COMMANDS.get(command_id)
    if record is None:
        raise ApiError(404, INVALID_REQUEST_BODY, f"command not found: {command_id}")
    exchange.respond_json(record.as_json())


def command_logs(exchange: Exchange, command_id: str) -> None:
    """Raw bytes from a byte cursor to EOF, and the new EOF offset in a header
    (docs/execd-wire.rst, wire-logs)."""
    record = COMMANDS.get(command_id)
    if record is None:
        raise bad_request(f"command not found: {command_id}")
    if not record.background:
        raise bad_request(f"command {command_id} is not running in background")
    # An unparsable cursor means 0 (docs/execd-wire.rst, wire-logs).
    cursor = go_parse_int(exchange.query_value("cursor")) or 0
    try:
        with open(record.output_path, "rb") as output:
            if cursor < 0:
                raise bad_request(f"error seek file: seek {record.output_path}: invalid argument")
            output.seek(cursor)
            content = output.read()
            end = output.tell()
    except OSError as error:
        raise bad_request(
            f"error open combined output file for command {command_id}: "
            + go_path_error("open", record.output_path, error)
        ) from None
    exchange.respond(
        200,
        content,
        {"EXECD-COMMANDS-TAIL-CURSOR": str(end), "Content-Type": "text/plain; charset=utf-8"},
    )


def interrupt_command(exchange: Exchange) -> None:
    """DELETE /command?id= answers 200 only after the group is gone
    (docs/execd-wire.rst, wire-interrupt)."""
    command_id = exchange.required_query_value("id")
    record = COMMANDS.get(command_id)
    # execd's messages, typo included.
    if record is None:
        raise runtime_error("error interruptting code context. no such session")
    # Read once: the command's end clears the pid, and a group of 0 would be execd's own.
    pgid = record.pid
    if not record.running or pgid <= 0:
        raise runtime_error(
            f"error interruptting code context. command session {command_id} is not running"
        )
    try:
        terminate_group(pgid)
    except OSError as error:
        raise runtime_error(
            "error interruptting code context. "
            f"failed to kill process group {pgid}: {go_errno_text(error)}"
        ) from None
    exchange.respond_empty()
