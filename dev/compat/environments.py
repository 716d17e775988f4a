"""Each combination's own virtual environment, synced to its pins, the package installed into it."""

from __future__ import annotations

import subprocess

from dev.compat.combinations import REPO, Combination


def _uv(*args: str) -> None:
    subprocess.run(["uv", *args], cwd=REPO, check=True, capture_output=True, text=True)


def build(combination: Combination) -> None:
    """Sync the environment to the pins, then install the package without its dependencies.

    Skipped while the environment is newer than its pins and pyproject.toml, as ``make setup``
    does, so a second run of the matrix only runs the checks.
    """
    marker = combination.env / ".synced"
    sources = (combination.pins, REPO / "pyproject.toml")
    if marker.exists() and all(marker.stat().st_mtime > s.stat().st_mtime for s in sources):
        return
    # uv finds the interpreter line on PATH (or among the ones it manages); without it, the
    # combination fails to build, naming the line to install.
    _uv("venv", "-q", "--allow-existing", "--python", combination.python, str(combination.env))
    _uv("pip", "sync", "-q", "--python", str(combination.python_path), str(combination.pins))
    # Editable, so every environment runs the working tree's code; --no-deps keeps the pins exact.
    _uv(
        "pip",
        "install",
        "-q",
        "--python",
        str(combination.python_path),
        "--no-deps",
        "-e",
        str(REPO),
    )
    marker.touch()
