"""The image the OpenSandboxExecutor's tries run in: the stack's sandbox image plus the Task SDK.

A try runs ``python -m airflow.sdk.execution_time.execute_workload``, which needs the Task SDK
and, for the Dag bundle and the workload's schema, ``apache-airflow-core``, at the versions the
scheduler runs. They are installed here, on the machine, into a folder the image copies in, with
the project's own pins as constraints (``requirements/pinned.txt``), by the same uv that set up
the project's environment and from its cache: the sandboxes never reach a package index, and a
test never builds anything. Like the stack's other images it is rebuilt only when a label
holding a digest of its inputs (the installed distributions, the Dockerfile, the base image)
differs.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from dev.stack import images
from dev.stack.paths import REPO, STACK_SOURCES

TAG = "opensandbox-test/airflow-task-sdk:local"
DOCKERFILE = STACK_SOURCES / "images" / "task-sdk.Dockerfile"
PINS = REPO / "requirements" / "pinned.txt"
# What a try imports: the Task SDK, and the core package its entry point and bundles live in.
DISTRIBUTIONS = ("apache-airflow-core", "apache-airflow-task-sdk")


def requirements() -> list[str]:
    """Each distribution at the version installed beside this code, which the scheduler runs."""
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in DISTRIBUTIONS]


def ensure_task_sdk_image(base_id: str | None = None) -> bool:
    """Builds the image unless it is here and current; True if this call built it."""
    base_id = base_id or images.image_id(images.SANDBOX_IMAGE) or ""
    with tempfile.TemporaryDirectory(prefix="task-sdk-image-") as work:
        site = Path(work) / "site"
        _install(site)
        installed = sorted(path.name for path in site.glob("*.dist-info"))
        digest = images.source_digest(
            base_id.encode(), DOCKERFILE.read_bytes(), "\n".join(installed).encode()
        )
        if images.source_label(TAG) == digest:
            return False
        before = images.image_id(TAG)
        _build(site, digest)
    if before is not None:
        subprocess.run(["docker", "image", "rm", before], capture_output=True)
    return True


def _install(site: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError(
            "Building the executor's image needs uv, which `make setup` installs; run it first."
        )
    install = subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            sys.executable,
            "--target",
            str(site),
            "--constraints",
            str(PINS),
            *requirements(),
        ],
        capture_output=True,
        text=True,
    )
    if install.returncode != 0:
        raise RuntimeError(
            f"Installing {', '.join(requirements())} for the executor's image failed; check "
            f"requirements/pinned.txt and the network, then run the stack again. uv said:\n"
            f"{install.stderr}"
        )


def _build(site: Path, digest: str) -> None:
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(DOCKERFILE, arcname="Dockerfile")
        tar.add(site, arcname="site")
    build = subprocess.run(
        [
            "docker",
            "build",
            "--quiet",
            "--label",
            f"{images.SOURCE_LABEL}={digest}",
            "-t",
            TAG,
            "-",
        ],
        input=context.getvalue(),
        capture_output=True,
        # The legacy builder, as for the stack's other images: offline from a local base.
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )
    if build.returncode != 0:
        raise RuntimeError(
            f"Building {TAG} failed; docker build said:\n{build.stderr.decode(errors='replace')}"
        )
