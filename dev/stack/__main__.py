"""``python -m dev.stack up|down|status|restart|run -- CMD...``: the local OpenSandbox stack."""

import argparse
import signal
import subprocess
import sys

from dev.stack import stack

COMMANDS = {"up": stack.up, "down": stack.down, "restart": stack.restart_servers}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.stack", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start the stack (idempotent; builds what is missing)")
    commands.add_parser("down", help="stop everything the stack started")
    commands.add_parser("status", help="print what an Airflow connection to each server needs")
    commands.add_parser("restart", help="restart the servers, e.g. after the execd image changed")
    run = commands.add_parser("run", help="run CMD against the stack, then stop what this started")
    run.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after `--`")
    args = parser.parse_args(argv)

    try:
        if args.command == "status":
            print(stack.status())
        elif args.command == "run":
            return _run(args.cmd)
        else:
            with stack.lock():
                COMMANDS[args.command]()
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"stack: {error}", file=sys.stderr)
        return 1
    return 0


def _run(cmd: list[str]) -> int:
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if not cmd:
        print("stack: give the command to run after `--`.", file=sys.stderr)
        return 2
    with stack.lock():
        started = stack.up()
    try:
        child = subprocess.Popen(cmd)
        # Ctrl-C reaches the command too (one process group); this process outlives the
        # command's own clean-up, such as make demo stopping Airflow, and then stops the stack.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return child.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        with stack.lock():
            stack.stop(started)


if __name__ == "__main__":
    sys.exit(main())
