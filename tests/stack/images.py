"""The three local images, each rebuilt only when what it is made from has changed.

Every image carries a label with a digest of its sources (and of its base image), so `up` on a
warm machine compares one label per image and builds nothing.
"""

import hashlib
import io
import json
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.stack import rootfs
from tests.stack.paths import STACK_SOURCES

# The backend's default image name: the server uses a local image only when name and tag match,
# so the debootstrap rootfs is tagged as exactly this and no sandbox ever needs a registry.
SANDBOX_IMAGE = "python:3.12-slim"
EXECD_IMAGE = "opensandbox-test/execd:local"
EGRESS_IMAGE = "opensandbox-test/egress:local"
SOURCE_LABEL = "org.opensandbox-provider.test.sources"
# The real python image sets this too; without it Python falls back to ASCII for I/O.
SANDBOX_IMAGE_ENV = "LANG=C.UTF-8"


@dataclass(frozen=True)
class DerivedImage:
    """An image built FROM the sandbox image with a Dockerfile and a few files from this repo."""

    tag: str
    dockerfile: Path
    programs: dict[str, Path]  # name in the build context -> an executable file
    modules: Path | None = None  # a directory of Python files the image runs or builds from

    def context_tar(self) -> bytes:
        """The build context, byte-for-byte the same for the same sources (so it can be hashed)."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            _add(tar, "Dockerfile", self.dockerfile.read_bytes(), 0o644)
            for name, source in sorted(self.programs.items()):
                # COPY keeps the mode, and the server and Docker exec these files directly.
                _add(tar, name, _read_source(source), 0o755)
            if self.modules is not None:
                for module in sorted(self.modules.glob("*.py")):
                    _add(tar, f"modules/{module.name}", module.read_bytes(), 0o644)
        return buffer.getvalue()


EXECD = DerivedImage(
    EXECD_IMAGE,
    STACK_SOURCES / "images" / "execd.Dockerfile",
    {"bootstrap.sh": STACK_SOURCES / "execd" / "bootstrap.sh"},
    modules=STACK_SOURCES / "execd",
)
EGRESS = DerivedImage(
    EGRESS_IMAGE,
    STACK_SOURCES / "images" / "egress.Dockerfile",
    {"egress": STACK_SOURCES / "egress" / "egress"},
    modules=STACK_SOURCES / "egress",
)


def ensure_images() -> list[str]:
    """Builds whichever image is missing or stale; returns the tags it built."""
    before = {tag: image_id(tag) for tag in (SANDBOX_IMAGE, EXECD.tag, EGRESS.tag)}
    built = []
    if ensure_sandbox_image():
        built.append(SANDBOX_IMAGE)
    base_id = image_id(SANDBOX_IMAGE) or ""
    for image in (EXECD, EGRESS):
        if ensure_derived_image(image, base_id):
            built.append(image.tag)
    # A rebuilt tag leaves its predecessor behind untagged. Remove it, derived images first since
    # they hold the old sandbox image as their parent; one a sandbox still runs on stays.
    for tag in reversed(built):
        if before[tag] is not None:
            subprocess.run(["docker", "image", "rm", before[tag]], capture_output=True)
    return built


def ensure_sandbox_image() -> bool:
    digest = _digest(rootfs.recipe_hash().encode(), SANDBOX_IMAGE_ENV.encode())
    if source_label(SANDBOX_IMAGE) == digest:
        return False
    tarball = rootfs.rootfs_tarball()
    changes = ["--change", f"LABEL {SOURCE_LABEL}={digest}", "--change", f"ENV {SANDBOX_IMAGE_ENV}"]
    subprocess.run(
        ["docker", "import", *changes, str(tarball), SANDBOX_IMAGE],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return True


def ensure_derived_image(image: DerivedImage, base_id: str) -> bool:
    context = image.context_tar()
    digest = _digest(base_id.encode(), context)
    if source_label(image.tag) == digest:
        return False
    build = subprocess.run(
        ["docker", "build", "--quiet", "--label", f"{SOURCE_LABEL}={digest}", "-t", image.tag, "-"],
        input=context,
        capture_output=True,
        # The legacy builder: it works offline from a local base image and needs no buildx plugin
        # (it prints a deprecation notice on every build, hence the captured output).
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )
    if build.returncode != 0:
        raise RuntimeError(
            f"Building {image.tag} failed; fix its sources under tests/stack and run the stack "
            f"again. docker build said:\n{build.stderr.decode(errors='replace')}"
        )
    return True


def image_id(tag: str) -> str | None:
    result = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True
    )
    return result.stdout.strip() if result.returncode == 0 else None


def source_label(tag: str) -> str | None:
    result = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", tag],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        return None
    return (json.loads(result.stdout) or {}).get(SOURCE_LABEL)


def _read_source(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RuntimeError(
            f"The stack image source {path} is missing; it is part of this repository, so "
            "restore it (git checkout) and run the stack again."
        ) from None


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def _digest(*parts: bytes) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(len(part).to_bytes(8, "big"))
        sha.update(part)
    return sha.hexdigest()[:16]
