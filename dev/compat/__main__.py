"""``python -m dev.compat pin`` writes the matrix's pins; ``python -m dev.compat run`` runs it."""

from __future__ import annotations

import argparse

from dev.compat.combinations import select
from dev.compat.pins import write_pins


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.compat")
    commands = parser.add_subparsers(dest="command", required=True)
    pin = commands.add_parser("pin", help="resolve and write each combination's pins")
    pin.add_argument("combinations", nargs="*", help="names such as airflow-3.3-sdk-1.1.1")
    args = parser.parse_args()
    if args.command == "pin":
        for combination in select(args.combinations):
            print(f"{combination.name}: {write_pins(combination).relative_to(combination.env.parents[1])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
