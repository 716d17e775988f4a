"""``python -m dev.kube build``: the Kubernetes binaries for the Kubernetes-runtime tests."""

import argparse
import subprocess
import sys

from dev.kube import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.kube", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "build", help="build the Kubernetes commands not yet cached for this version"
    )
    parser.parse_args(argv)
    try:
        for command, binary in build.build().items():
            print(f"{command}: {binary}")
    except subprocess.CalledProcessError as error:
        print(f"kube: {' '.join(error.cmd)} failed:\n{error.stderr}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
