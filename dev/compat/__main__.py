"""``python -m dev.compat pin|run``: what ``make compat-pin`` and ``make compat`` run.

``run`` builds each combination's environment, runs the checks that need nothing, then the
two that use the stack in a turn of their own (``--stack-turn`` names the command that waits
for the stack's lock), and prints the table; it exits non-zero when any check failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from dev.compat import checks, report, stack_phase
from dev.compat.combinations import REPO, Combination, select
from dev.compat.environments import build
from dev.compat.outcome import CheckOutcome
from dev.compat.pins import write_pins


def _say(text: str) -> None:
    print(text, flush=True)


def _environment(combination: Combination) -> CheckOutcome:
    started = time.monotonic()
    try:
        build(combination)
    except subprocess.CalledProcessError as error:
        return CheckOutcome(
            "environment",
            False,
            round(time.monotonic() - started, 1),
            "uv failed",
            str(error.stderr)[-2000:],
        )
    return CheckOutcome("environment", True, round(time.monotonic() - started, 1), "synced")


def _print(combination: Combination, outcomes: list[CheckOutcome]) -> None:
    for outcome in outcomes:
        mark = "pass" if outcome.passed else "FAIL"
        _say(
            f"{combination.name} {outcome.check}: {mark} in {outcome.seconds:.1f}s"
            f" ({outcome.summary})"
        )
        if not outcome.passed and outcome.tail:
            _say(outcome.tail)


def run_matrix(
    combinations: tuple[Combination, ...], *, lock: str | None, stack: bool, keep_others: bool
) -> int:
    """Each combination's stack checks wait for their turn of the stack in one background
    thread, in order, while the next combinations build and run the checks that need nothing:
    a shared stack's queue then costs the run little."""
    results: dict[Combination, list[CheckOutcome]] = {}
    pending: list[tuple[Combination, Future[list[CheckOutcome]]]] = []
    with ThreadPoolExecutor(max_workers=1) as stack_turns:
        for combination in combinations:
            outcomes = [_environment(combination)]
            if outcomes[0].passed:
                outcomes += [check(combination) for check in checks.NO_STACK_CHECKS]
                if stack:
                    turn = stack_turns.submit(stack_phase.run_in_turn, combination, lock)
                    pending.append((combination, turn))
            _print(combination, outcomes)
            results[combination] = outcomes
        for combination, turn in pending:
            stack_outcomes = turn.result()
            _print(combination, stack_outcomes)
            results[combination] += stack_outcomes
            # After each combination, so an interrupted run still leaves what it proved.
            report.write_artifact(results, keep_others=keep_others)
    artifact = report.write_artifact(results, keep_others=keep_others)
    _say("\n" + report.table(results))
    _say(f"\nWritten to {artifact.relative_to(REPO)}")
    return 0 if report.gating_passed(results) else 1


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.compat")
    commands = parser.add_subparsers(dest="command", required=True)
    pin = commands.add_parser("pin", help="resolve and write each combination's pins")
    pin.add_argument("combinations", nargs="*", help="names such as airflow-3.3-sdk-1.1.1")
    matrix = commands.add_parser("run", help="build each environment and run the checks")
    matrix.add_argument("combinations", nargs="*", help="names such as airflow-3.3-sdk-1.1.1")
    matrix.add_argument("--stack-turn", help="command prefix that waits for the stack's lock")
    matrix.add_argument("--no-stack", action="store_true", help="only the checks without it")
    matrix.add_argument(
        "--keep-others",
        action="store_true",
        help="keep the artifact's rows of the combinations not run, with their date and commit",
    )
    commands.add_parser("doc", help="write the last run's table into docs/compatibility.rst")
    phase = commands.add_parser("stack-phase", help=argparse.SUPPRESS)
    phase.add_argument("combination")
    phase.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "pin":
        for combination in select(args.combinations):
            _say(f"{combination.name}: {write_pins(combination).relative_to(REPO)}")
        return 0
    if args.command == "doc":
        _say(f"Written to {report.write_doc().relative_to(REPO)}")
        return 0
    if args.command == "stack-phase":
        (combination,) = select([args.combination])
        stack_phase.run_here(combination, args.out)
        return 0
    return run_matrix(
        select(args.combinations),
        lock=args.stack_turn,
        stack=not args.no_stack,
        keep_others=args.keep_others,
    )


if __name__ == "__main__":
    sys.exit(main())
