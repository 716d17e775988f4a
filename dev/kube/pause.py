"""The pause image every pod sandbox starts from, built here since no registry can be reached.

It is a one-file image: a static ``/pause`` compiled from ``pause/pause.c``, written as the
archive ``docker save`` writes (a manifest naming the tag, a config, one layer), which
``ctr images import`` reads.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import shutil
import subprocess
import tarfile
from pathlib import Path

from dev.kube.config import PAUSE_IMAGE

SOURCE = Path(__file__).resolve().parent / "pause" / "pause.c"
# The image config names the architecture as Go does; the binary is built for this machine.
GO_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def compile_pause(out_dir: Path) -> Path:
    """Compiles the static pause binary into ``out_dir``; static, so the image needs no libc."""
    if shutil.which("gcc") is None:
        raise RuntimeError(
            "Building the pause image needs a C compiler. Install Debian's `gcc` and `libc6-dev` "
            "and run `up` again."
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / "pause"
    argv = ["gcc", "-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror", "-o", str(binary)]
    compiled = subprocess.run([*argv, str(SOURCE)], capture_output=True, text=True)
    if compiled.returncode != 0:
        raise RuntimeError(
            f"Compiling the pause binary failed:\n{compiled.stderr}\nA static build needs the C "
            "library's static archive too: install Debian's `libc6-dev` and run `up` again."
        )
    return binary


def image_archive(binary: bytes, tag: str = PAUSE_IMAGE) -> bytes:
    """A ``docker save``-style archive of a one-layer image running ``/pause``; the same binary
    gives the same bytes."""
    layer = _tar({"pause": (binary, 0o755)})
    layer_digest = hashlib.sha256(layer).hexdigest()
    config = json.dumps(
        {
            "architecture": GO_ARCH.get(platform.machine(), platform.machine()),
            "os": "linux",
            "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        },
        sort_keys=True,
    ).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    layer_name = f"{layer_digest}/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [tag], "Layers": [layer_name]}])
    return _tar(
        {
            "manifest.json": (manifest.encode(), 0o644),
            config_name: (config, 0o644),
            layer_name: (layer, 0o644),
        }
    )


def _tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
