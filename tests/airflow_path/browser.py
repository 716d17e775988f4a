"""Headless Debian Chromium driven by playwright, with the flags that work on this kind of machine.

playwright brings its driver but not a browser here (nothing may be downloaded outside the
package registries), so it launches the distribution's ``chromium`` package, installed on
first use when it is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

# No sandbox (we run as root), no GPU, and nothing that phones home.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_executable() -> str:
    """The path of Debian's chromium, installing the package with apt-get if it is missing."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.fail(
            "The browser test needs Debian's chromium package and cannot install it without root. "
            "Install it with `sudo apt-get install chromium`, then run the tests again."
        )
    environment = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        result = subprocess.run(command, env=environment, capture_output=True, text=True)
        if result.returncode:
            pytest.fail(
                f"`{' '.join(command)}` failed with exit code {result.returncode}, so the browser "
                f"test has no browser:\n{result.stdout[-1500:]}{result.stderr[-1500:]}"
            )
    found = shutil.which("chromium")
    if not found:
        pytest.fail("apt-get installed chromium, yet no `chromium` is on PATH.")
    return found
