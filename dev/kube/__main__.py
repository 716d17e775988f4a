"""``python -m dev.kube build|up|down|status|load IMAGE|server up|down|status``: a local
single-node Kubernetes, and OpenSandbox's controller and Kubernetes-mode servers on it."""

import argparse
import subprocess
import sys

from dev.kube import build, cluster, opensandbox, runtime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.kube", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "build", help="build the Kubernetes commands not yet cached for this version"
    )
    commands.add_parser("up", help="start the cluster (idempotent; starts what is not running)")
    commands.add_parser("down", help="stop every process the cluster started, pods first")
    commands.add_parser("status", help="print what a connection to the cluster needs")
    load = commands.add_parser("load", help="import a Docker image into the cluster's containerd")
    load.add_argument("image", help="an image Docker has, e.g. python:3.12-slim")
    server = commands.add_parser(
        "server", help="OpenSandbox's controller and its servers in Kubernetes mode"
    )
    server.add_argument("action", choices=("up", "down", "status"))
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            for command, binary in build.build().items():
                print(f"{command}: {binary}")
        elif args.command == "status":
            print(cluster.status())
        elif args.command == "load":
            runtime.load_docker_image(args.image)
            print(f"loaded {args.image}")
        elif args.command == "server" and args.action == "status":
            print(opensandbox.status())
        elif args.command == "server":
            with cluster.lock():
                if args.action == "up":
                    opensandbox.up()
                    print(opensandbox.status())
                else:
                    print("\n".join(opensandbox.down()) or "nothing was running")
        else:
            with cluster.lock():
                if args.command == "up":
                    cluster.up()
                    print(cluster.status())
                else:
                    print("\n".join(cluster.down()) or "nothing was running")
    except subprocess.CalledProcessError as error:
        output = error.stderr if isinstance(error.stderr, str) else (error.stderr or b"").decode()
        print(f"kube: {' '.join(map(str, error.cmd))} failed:\n{output}", file=sys.stderr)
        return 1
    except RuntimeError as error:
        print(f"kube: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
