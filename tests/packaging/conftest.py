"""The release as it would be uploaded: built twice from clean copies, installed into a fresh venv.

Nothing here needs the stack; uv builds and installs from its cache, constrained to the
project's pins, so the same backend and the same dependency versions serve every run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "requirements" / "pinned.txt"
# Any fixed instant: what matters is that both builds get the same one.
SOURCE_DATE_EPOCH = "1764547200"


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path


@dataclass(frozen=True)
class Venv:
    root: Path
    home: Path

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the venv's python with a throwaway AIRFLOW_HOME and none of this process's set-up
        (PYTHONPATH would import the source tree instead of the installed wheel)."""
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AIRFLOW", "PYTEST_", "VIRTUAL_ENV", "PYTHONPATH"))
        } | {"AIRFLOW_HOME": str(self.home), **(env or {})}
        result = subprocess.run(
            [str(self.root / "bin" / "python"), *args],
            env=environment,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
        return result


def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        pytest.fail("uv is not on PATH; `make setup` installs it.")
    return found


def clean_copy(destination: Path, *, keep_mtimes: bool) -> Path:
    """The tracked files only, as a fresh clone has them: nothing untracked reaches a release."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout.decode()
    # Either way the mode bits come along, as a clone sets them from git.
    copy = shutil.copy2 if keep_mtimes else shutil.copy
    for name in filter(None, tracked.split("\0")):
        source = REPO / name
        if source.is_file():  # a file deleted in the work tree but not yet in the index
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            copy(source, destination / name)
    return destination


def build(source: Path, out: Path) -> Dists:
    """``uv build`` as docs/releasing.rst runs it: the sdist, then the wheel from the sdist."""
    subprocess.run(
        [uv(), "build", "-q", "--build-constraints", str(PINS), "--out-dir", str(out), str(source)],
        env=os.environ | {"SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH},
        check=True,
        capture_output=True,
        timeout=300,
    )
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dists(sdist, wheel)


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dists, Dists]:
    """Two builds from two copies at different paths, one keeping the files' times and one
    stamping them now, so neither the place nor the file times can reach the archives."""
    first, second = (
        build(
            clean_copy(tmp_path_factory.mktemp(f"source-{n}"), keep_mtimes=n == 1),
            tmp_path_factory.mktemp(f"dist-{n}"),
        )
        for n in (1, 2)
    )
    return first, second


@pytest.fixture(scope="session")
def dists(builds: tuple[Dists, Dists]) -> Dists:
    return builds[0]


@pytest.fixture(scope="session")
def with_extra(dists: Dists, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with the wheel and its ``opensandbox`` extra, at the pinned versions."""
    root = tmp_path_factory.mktemp("venv-extra")
    subprocess.run([uv(), "venv", "-q", "--python", sys.executable, str(root)], check=True)
    subprocess.run(
        [
            uv(), "pip", "install", "-q", "--python", str(root / "bin" / "python"),
            f"{dists.wheel}[opensandbox]", "--constraints", str(PINS),
        ],
        check=True,
        timeout=300,
    )  # fmt: skip
    home = root / "airflow-home"
    home.mkdir()
    return Venv(root, home)
