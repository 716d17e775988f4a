"""Build the Kubernetes commands once per machine, into a cache keyed by version."""

import json
import os
import subprocess
import time
from pathlib import Path

from dev.kube import gomod

VERSION = "v1.33.13"


def cache_dir(version: str = VERSION) -> Path:
    """KUBE_CACHE_DIR, or a folder under the user's cache, outside the repository."""
    override = os.environ.get("KUBE_CACHE_DIR")
    base = Path(override) if override else Path.home() / ".cache" / "opensandbox-provider" / "kube"
    return base / version


def _go_env() -> dict[str, str]:
    # One compile at a time, so the machine stays usable while this runs for half an hour.
    return {**os.environ, "GOFLAGS": "-p=1", "GOTOOLCHAIN": "local"}


def _go(args: list[str], cwd: Path) -> str:
    return subprocess.run(
        ["nice", "-n", "19", "go", *args],
        cwd=cwd,
        env=_go_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def write_module(version: str = VERSION) -> Path:
    """Write the wrapper module into the cache and tidy it; returns its folder."""
    module = cache_dir(version) / "module"
    module.mkdir(parents=True, exist_ok=True)
    info = json.loads(_go(["mod", "download", "-json", f"k8s.io/kubernetes@{version}"], module))
    kubernetes_go_mod = Path(info["GoMod"]).read_text()
    (module / "go.mod").write_text(gomod.wrapper_go_mod(version, kubernetes_go_mod))
    (module / "tools.go").write_text(gomod.tools_go())
    _go(["mod", "tidy"], module)
    return module


def build(version: str = VERSION) -> dict[str, Path]:
    """Build each command not yet in the cache; returns every command's binary."""
    bin_dir = cache_dir(version) / "bin"
    cached = {command: bin_dir / command for command in gomod.COMMANDS}
    if all(binary.exists() for binary in cached.values()):
        return cached  # nothing to build, so no need to ask the module proxy anything
    module = write_module(version)
    bin_dir.mkdir(exist_ok=True)
    binaries = {}
    for command in gomod.COMMANDS:
        binary = bin_dir / command
        if not binary.exists():
            started = time.monotonic()
            partial = bin_dir / f".{command}.partial"
            _go(
                [
                    "build",
                    "-trimpath",
                    "-ldflags",
                    gomod.version_ldflags(version),
                    "-o",
                    str(partial),
                    f"k8s.io/kubernetes/cmd/{command}",
                ],
                module,
            )
            partial.rename(binary)  # only a finished build counts as cached
            print(f"built {command} in {time.monotonic() - started:.0f} s", flush=True)
        binaries[command] = binary
    return binaries
