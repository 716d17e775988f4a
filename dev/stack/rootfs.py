"""A Debian rootfs tarball made with debootstrap, cached under ``.stack/cache``.

The mirror comes from this machine's apt sources at build time, so the repository never names
one: every machine (a developer's, CI's) uses the mirror it is already configured for.
"""

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from dev.stack.paths import CACHE_DIR

SUITE = "bookworm"
VARIANT = "minbase"
# What a sandbox needs: python3 runs the execd stand-in and user code (python-is-python3 gives the
# `python` name the real python image has, python3-venv its `python -m venv` with pip, which
# @task.opensandbox(requirements=...) makes its environment with); procps, findutils and
# coreutils serve commands the SDK tests run; nftables and iproute2 let the egress stand-in
# enforce policy in the kernel.
PACKAGES = (
    "python3",
    "python-is-python3",
    "python3-venv",
    "coreutils",
    "findutils",
    "procps",
    "nftables",
    "iproute2",
    "ca-certificates",
)
APT_SOURCES = Path("/etc/apt/sources.list.d")
APT_SOURCES_LIST = Path("/etc/apt/sources.list")


def recipe_hash() -> str:
    """A digest of everything that decides the rootfs contents (the mirror does not)."""
    recipe = {"suite": SUITE, "variant": VARIANT, "packages": PACKAGES}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def rootfs_tarball() -> Path:
    """Returns the cached tarball, building it with debootstrap first if it is missing."""
    tarball = CACHE_DIR / f"rootfs-{SUITE}-{recipe_hash()}.tar"
    if tarball.exists():
        return tarball
    if shutil.which("debootstrap") is None:
        raise RuntimeError(
            "Building the sandbox image needs debootstrap. Install it (Debian package "
            "`debootstrap`) and run the stack again."
        )
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    mirror = debian_mirror()
    with tempfile.TemporaryDirectory(dir=CACHE_DIR, prefix="debootstrap-") as work:
        target = Path(work) / "rootfs"
        subprocess.run(
            [
                "debootstrap",
                f"--variant={VARIANT}",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(target),
                mirror,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        # apt's package lists and caches are a third of the size and no sandbox needs them.
        for leftover in ("var/lib/apt/lists", "var/cache/apt"):
            shutil.rmtree(target / leftover, ignore_errors=True)
        partial = tarball.with_suffix(".partial")
        subprocess.run(
            ["tar", "-C", str(target), "--numeric-owner", "-cf", str(partial), "."], check=True
        )
        partial.rename(tarball)
    return tarball


def debian_mirror() -> str:
    """The URI of the first apt source that serves the Debian suite we bootstrap."""
    for uri, suites in _apt_sources():
        if SUITE in suites:
            return uri
    raise RuntimeError(
        f"No apt source on this machine serves Debian {SUITE!r}. Add one to "
        f"{APT_SOURCES} (or {APT_SOURCES_LIST}) so debootstrap knows which mirror to use."
    )


def _apt_sources():
    """Yields (uri, suites) from deb822 ``.sources`` files and one-line ``sources.list`` files."""
    for path in sorted(APT_SOURCES.glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = _deb822_fields(stanza)
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes") != "no":
                for uri in fields.get("uris", "").split():
                    yield uri, fields.get("suites", "").split()
    for path in [APT_SOURCES_LIST, *sorted(APT_SOURCES.glob("*.list"))]:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            words = line.split("#", 1)[0].split()
            if words[:1] == ["deb"]:
                # Drop a "[signed-by=...]" options block between "deb" and the URI.
                words = [w for w in words[1:] if not (w.startswith("[") or w.endswith("]"))]
                if len(words) >= 2:
                    yield words[0], [words[1]]


def _deb822_fields(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = None
    for line in stanza.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line[0].isspace() and key:
            fields[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            fields[key] = value.strip()
    return fields
