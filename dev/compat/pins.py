"""Each combination's exact versions, resolved by uv and written without download addresses."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from dev.compat.combinations import PINS_DIR, REPO, Combination


def header(combination: Combination) -> str:
    if combination.lowest:
        what = "Every declared requirement at the lowest version its range allows"
    else:
        airflow = (
            f"{combination.airflow}.x"
            if combination.airflow == combination.line
            else combination.airflow
        )
        what = (
            f"Airflow {airflow}, common-ai {combination.common_ai}, OpenSandbox SDK "
            f"{combination.sdk}, Python {combination.python}"
        )
    return (
        f"# {what}: one combination\n"
        "# of the matrix (dev/compat). Regenerate with `make compat-pin`.\n"
    )


def compile_pins(combination: Combination) -> str:
    """The resolution of the package's declared ranges (its ``opensandbox`` and ``pool`` extras
    included) together with what the combination fixes, one ``name==version`` a line."""
    with (
        tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="compat-") as fixed,
        tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="compat-held-") as held,
    ):
        fixed.write("\n".join(combination.requirements()) + "\n")
        fixed.flush()
        held.write("".join(f"{bound}\n" for bound in combination.held_back()))
        held.flush()
        result = subprocess.run(
            [
                "uv",
                "pip",
                "compile",
                "--quiet",
                "--no-header",
                "--no-annotate",
                "--python-version",
                combination.python,
                *(["--resolution", "lowest-direct"] if combination.lowest else []),
                "--extra",
                "opensandbox",
                "--extra",
                "pool",
                "--constraint",
                held.name,
                str(REPO / "pyproject.toml"),
                fixed.name,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        raise SystemExit(f"{combination.name} does not resolve:\n{result.stderr}")
    return result.stdout


def write_pins(combination: Combination) -> Path:
    PINS_DIR.mkdir(parents=True, exist_ok=True)
    combination.pins.write_text(header(combination) + compile_pins(combination), encoding="utf-8")
    return combination.pins
