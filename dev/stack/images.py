"""The stack's three images: ours, each rebuilt only when its sources change, or ones named.

Every image we build carries a label with a digest of its sources (and of its base image), so
`up` on a warm machine compares one label per image and builds nothing. ``SANDBOX_IMAGE``,
``EXECD_IMAGE`` and ``EGRESS_IMAGE`` in the environment name an image for that role instead
(the upstream ``opensandbox/execd`` and ``opensandbox/egress``, say): the stack then uses it as
it is and builds nothing of its own for that role.
"""

import hashlib
import io
import json
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from dev.stack import rootfs
from dev.stack.paths import STACK_SOURCES

# The environment variables that name an image for a role, and what each role is for.
ROLES = {
    "sandbox": "SANDBOX_IMAGE",  # what every test sandbox runs, unless a test names another
    "execd": "EXECD_IMAGE",  # the server copies /execd and /bootstrap.sh out of it
    "egress": "EGRESS_IMAGE",  # the sidecar of the dns and dns+nft servers
}
STAND_IN = "ours"
NAMED = "named"

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


@dataclass(frozen=True)
class ImageChoice:
    """Which image serves each role, and whether it is ours (built here) or one someone named."""

    images: dict[str, str]  # role -> image reference
    kinds: dict[str, str]  # role -> STAND_IN or NAMED

    def image(self, role: str) -> str:
        return self.images[role]

    def is_named(self, role: str) -> bool:
        return self.kinds[role] == NAMED


def chosen_images(environ: dict[str, str] | None = None) -> ImageChoice:
    """The images of this run: a role's variable, when set and not blank, names its image."""
    environ = os.environ if environ is None else environ
    ours = {"sandbox": SANDBOX_IMAGE, "execd": EXECD.tag, "egress": EGRESS.tag}
    images, kinds = {}, {}
    for role, variable in ROLES.items():
        named = environ.get(variable, "").strip()
        images[role] = named or ours[role]
        kinds[role] = NAMED if named else STAND_IN
    return ImageChoice(images, kinds)


def ensure_images(choice: ImageChoice) -> list[str]:
    """Builds whichever of our images is missing or stale, and makes sure each named one is
    here; returns what it built or pulled."""
    pulled = [choice.image(role) for role in ROLES if choice.is_named(role)]
    pulled = [reference for reference in pulled if ensure_named(reference)]
    ours = [role for role in ROLES if not choice.is_named(role)]
    if not ours:
        return pulled
    # Our execd and egress stand-ins are built FROM our sandbox image (it has their python3), so
    # it is needed whenever either is ours, even when the tests' sandboxes run a named image.
    before = {tag: image_id(tag) for tag in (SANDBOX_IMAGE, EXECD.tag, EGRESS.tag)}
    built = []
    if ensure_sandbox_image():
        built.append(SANDBOX_IMAGE)
    base_id = image_id(SANDBOX_IMAGE) or ""
    for role, image in (("execd", EXECD), ("egress", EGRESS)):
        if role in ours and ensure_derived_image(image, base_id):
            built.append(image.tag)
    # A rebuilt tag leaves its predecessor behind untagged. Remove it, derived images first since
    # they hold the old sandbox image as their parent; one a sandbox still runs on stays.
    for tag in reversed(built):
        if before[tag] is not None:
            subprocess.run(["docker", "image", "rm", before[tag]], capture_output=True)
    return pulled + built


def ensure_named(reference: str) -> bool:
    """Makes sure a named image is in the engine, pulling it if it is not; True if pulled."""
    if image_id(reference) is not None:
        return False
    pull = subprocess.run(["docker", "pull", "--quiet", reference], capture_output=True, text=True)
    if pull.returncode != 0:
        raise RuntimeError(
            f"The image {reference!r} named for the stack is not in the local Docker engine and "
            f"could not be pulled ({pull.stderr.strip()}). Load or build it first (docker load, "
            "docker build), or unset the variable that names it to use our stand-in."
        )
    return True


def ensure_sandbox_image() -> bool:
    digest = source_digest(rootfs.recipe_hash().encode(), SANDBOX_IMAGE_ENV.encode())
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
    digest = source_digest(base_id.encode(), context)
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
            f"Building {image.tag} failed; fix its sources under dev/stack and run the stack "
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


def source_digest(*parts: bytes) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(len(part).to_bytes(8, "big"))
        sha.update(part)
    return sha.hexdigest()[:16]
