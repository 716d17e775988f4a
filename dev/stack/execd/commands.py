"""POST /command: a command in the foreground or the background, answered as an event stream."""

import subprocess
import threading
import time

from command_records import COMMANDS, CommandRecord, new_command_id
from command_request import CommandRequest, parse_command_request, validate_command_request
from events import EventStream, Heartbeat, error_event, stream_event
from exchange import RUNTIME_ERROR, Exchange, runtime_error
from go_encoding import exit_outcome, go_json
from launch import open_output_file, output_path, prepare_launch, start_failure_text, start_process
from output_lines import OutputTailer
from path_expansion import PathError
from process_groups import kill_leftovers, wait_with_deadline

# execd sleeps ApiGracefulShutdownTimeout (1 s) after the terminal event before the
# response ends. Closing at once would make every latency measured against the stack look better
# than against a real server (docs/execd-wire.rst, wire-grace).
GRACEFUL_SHUTDOWN = 1.0


def run_command(exchange: Exchange) -> None:
    request = parse_command_request(exchange.body())
    validate_command_request(request)
    if request.background:
        run_background(exchange, request)
    else:
        run_foreground(exchange, request)


def milliseconds_since(started_ns: int) -> int:
    return (time.time_ns() - started_ns) // 1_000_000


def end_after_grace(stream: EventStream, heartbeat: Heartbeat) -> None:
    """The response ends a grace period after the terminal event; the heartbeat runs until then."""
    time.sleep(GRACEFUL_SHUTDOWN)
    stream.end()
    heartbeat.stop()


def run_foreground(exchange: Exchange, request: CommandRequest) -> None:
    """init, ping, line events, exactly one terminal event, then 1 s, then EOF
    (docs/execd-wire.rst, wire-sequences, wire-grace)."""
    command_id = new_command_id()
    stdout_path = output_path(command_id, "stdout")
    stderr_path = output_path(command_id, "stderr")
    # Failures before the first event are plain JSON 500s
    # (docs/execd-wire.rst, wire-command-request).
    try:
        stdout, stderr = open_output_file(stdout_path), open_output_file(stderr_path)
    except OSError as error:
        message = f"error running commands failed to get stdlog descriptor: {error}"
        raise runtime_error(message) from None
    with stdout, stderr:
        try:
            launch = prepare_launch(request)
        except PathError as error:
            message = f"error running commands resolve request cwd {request.cwd}: {error}"
            raise runtime_error(message) from None
        stream = EventStream(exchange)
        heartbeat = Heartbeat(stream)
        tailers = [
            OutputTailer(stdout_path, "stdout", stream),
            OutputTailer(stderr_path, "stderr", stream),
        ]
        for tailer in tailers:
            tailer.start()
        started_at = time.time_ns()
        try:
            process = start_process(launch, stdout, stderr)
        except OSError as error:
            # A start failure is init then error; no output events and no status record
            # (docs/execd-wire.rst, wire-sequences).
            for tailer in tailers:
                tailer.finish()
            stream.send(stream_event("init", text=command_id))
            heartbeat.start()
            text = start_failure_text(launch, error)
            stream.send(error_event(text, text))
        else:
            record = CommandRecord(command_id, request.command, False, stdout_path, started_at)
            record.pid = process.pid
            COMMANDS.add(record)
            # init is always first; the tailers' first poll is 100 ms after they start
            # (docs/execd-wire.rst, wire-ordering).
            stream.send(stream_event("init", text=command_id))
            heartbeat.start()
            returncode = wait_with_deadline(process, request.timeout_ms)
            # Both outputs are drained before the terminal event, so none follows it
            # (docs/execd-wire.rst, wire-ordering).
            for tailer in tailers:
                tailer.finish()
            stream.send(terminal_event(record, returncode))
    end_after_grace(stream, heartbeat)


def terminal_event(record: CommandRecord, returncode: int) -> dict:
    """execution_complete on exit 0, otherwise error; the status record learns the same
    (docs/execd-wire.rst, wire-exit)."""
    exit_code, error_text = exit_outcome(returncode)
    if returncode != 0:
        record.finish(exit_code, error_text)
        return error_event(str(exit_code), error_text)
    record.finish(0, "")
    return stream_event("execution_complete", execution_time=milliseconds_since(record.started_at))


class BackgroundStartFailure(Exception):
    """Why a background command could not start, in execd's words."""


def run_background(exchange: Exchange, request: CommandRequest) -> None:
    """init, then execution_complete right after the start; output only via logs
    (docs/execd-wire.rst, wire-background)."""
    command_id = new_command_id()
    stream = EventStream(exchange)
    heartbeat = Heartbeat(stream)
    # In the background path init is sent before anything can fail
    # (docs/execd-wire.rst, wire-sequences).
    stream.send(stream_event("init", text=command_id))
    heartbeat.start()
    started_at = time.time_ns()
    try:
        start_background(command_id, request, started_at)
    except BackgroundStartFailure as failure:
        # The handler's 500 JSON error is appended raw to the already-200 stream, which
        # then ends at once (docs/execd-wire.rst, wire-sequences).
        message = f"error running commands {failure}"
        stream.append_raw(go_json({"code": RUNTIME_ERROR, "message": message}))
        heartbeat.stop()
        stream.end()
        return
    stream.send(stream_event("execution_complete", execution_time=milliseconds_since(started_at)))
    end_after_grace(stream, heartbeat)


def start_background(command_id: str, request: CommandRequest, started_at: int) -> None:
    """Starts the command with its record and a watcher; a failed start records 255
    (docs/execd-wire.rst, wire-status)."""
    combined_path = output_path(command_id, "output")
    try:
        output = open_output_file(combined_path)
    except OSError as error:
        raise BackgroundStartFailure(f"failed to get combined output descriptor: {error}") from None
    with output:
        try:
            launch = prepare_launch(request)
        except PathError as error:
            raise BackgroundStartFailure(f"resolve cwd: {error}") from None
        record = CommandRecord(command_id, request.command, True, combined_path, started_at)
        try:
            # Stdout and stderr share one descriptor, so they interleave truly
            # (docs/execd-wire.rst, wire-launch).
            process = start_process(launch, output, output)
        except OSError as error:
            text = start_failure_text(launch, error)
            COMMANDS.add(record)
            record.finish(255, text)
            raise BackgroundStartFailure(f"failed to start commands: {text}") from None
    record.pid = process.pid
    COMMANDS.add(record)
    watcher = threading.Thread(
        target=watch_background, args=(process, record, request.timeout_ms), daemon=True
    )
    watcher.start()


def watch_background(process: subprocess.Popen, record: CommandRecord, timeout_ms: int) -> None:
    """Records the exit; at the deadline the group is SIGKILLed (docs/execd-wire.rst, wire-status,
    wire-timeout)."""
    returncode = wait_with_deadline(process, timeout_ms)
    exit_code, error_text = exit_outcome(returncode)
    record.finish(exit_code, "" if returncode == 0 else error_text)
    kill_leftovers(process.pid)
