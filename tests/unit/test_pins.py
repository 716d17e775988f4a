"""The versions the tests run on are ones the package's declared ranges accept."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]


def pinned() -> dict[str, str]:
    """``requirements/pinned.txt`` as name to version, its markers and comments dropped."""
    pins = {}
    for line in (REPO / "requirements" / "pinned.txt").read_text(encoding="utf-8").splitlines():
        requirement = line.split(";")[0].strip()
        if "==" in requirement and not requirement.startswith("#"):
            name, version = requirement.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = [project["dependencies"], *project["optional-dependencies"].values()]
    return [Requirement(line) for group in groups for line in group]


@pytest.mark.parametrize("requirement", declared(), ids=str)
def test_the_pinned_version_satisfies_the_declared_range(requirement: Requirement) -> None:
    version = pinned().get(canonicalize_name(requirement.name))
    assert version is not None, f"{requirement.name} is declared but not pinned"
    assert requirement.specifier.contains(version, prereleases=True), (
        f"{requirement.name} is pinned at {version}, outside the declared {requirement}"
    )


def test_the_pins_record_no_download_address() -> None:
    # A URL, a direct reference or a local path would tie every install to one host or one
    # machine; the pins name versions only.
    lines = (REPO / "requirements" / "pinned.txt").read_text(encoding="utf-8").splitlines()
    assert [line for line in lines if "://" in line] == []
    requirements = [line for line in lines if line and not line.lstrip().startswith("#")]
    assert requirements, "requirements/pinned.txt pins nothing"
    assert [line for line in requirements if "==" not in line or " @ " in line] == []


def test_the_pinned_build_backend_satisfies_the_build_requirement() -> None:
    # Releases are built with the pins as build constraints (docs/releasing.rst).
    build_system = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (requirement,) = [Requirement(line) for line in build_system["build-system"]["requires"]]
    version = pinned().get(canonicalize_name(requirement.name))
    assert version is not None, f"the build backend {requirement.name} is not pinned"
    assert requirement.specifier.contains(version), f"{requirement.name} {version}"
