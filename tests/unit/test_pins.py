"""The versions the tests run on are ones the package's declared ranges accept.

That holds for the project's own pins and for each combination of the compatibility matrix
(``requirements/compat``, ``make compat-pin``), whose pin files carry no download address.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from dev.compat.combinations import COMBINATIONS, HELD_BACK, PINS_DIR, Combination

REPO = Path(__file__).resolve().parents[2]
PIN_FILES = [REPO / "requirements" / "pinned.txt", *(c.pins for c in COMBINATIONS)]
# What a pin file must not carry: an address, or an option that points pip or uv at an index.
_ADDRESS = re.compile(r"://|^\s*-(-index-url|-extra-index-url|-find-links|i|f)\b", re.MULTILINE)


def pins_of(path: Path) -> dict[str, str]:
    """A pin file as name to version, its markers and comments dropped."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        requirement = line.split(";")[0].strip()
        if "==" in requirement and not requirement.startswith("#"):
            name, version = requirement.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = [project["dependencies"], *project["optional-dependencies"].values()]
    return [Requirement(line) for group in groups for line in group]


@pytest.mark.parametrize("pin_file", PIN_FILES, ids=lambda path: path.name)
@pytest.mark.parametrize("requirement", declared(), ids=str)
def test_the_pinned_version_satisfies_the_declared_range(
    requirement: Requirement, pin_file: Path
) -> None:
    version = pins_of(pin_file).get(canonicalize_name(requirement.name))
    assert version is not None, f"{requirement.name} is declared but not pinned in {pin_file.name}"
    assert requirement.specifier.contains(version, prereleases=True), (
        f"{requirement.name} is pinned at {version} in {pin_file.name}, outside the declared "
        f"{requirement}"
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
    version = pins_of(REPO / "requirements" / "pinned.txt").get(canonicalize_name(requirement.name))
    assert version is not None, f"the build backend {requirement.name} is not pinned"
    assert requirement.specifier.contains(version), f"{requirement.name} {version}"


def declared_lines(*, only_the_sdk_from_the_extra: bool = False) -> list[str]:
    """The requirements as pyproject.toml spells them, which is how the docs quote them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = project["optional-dependencies"]["opensandbox"]
    if only_the_sdk_from_the_extra:
        extra = [line for line in extra if Requirement(line).name == "opensandbox"]
    return [*project["dependencies"], *extra]


@pytest.mark.parametrize("line", declared_lines())
def test_the_installation_page_states_each_declared_range(line: str) -> None:
    page = (REPO / "docs" / "installation.rst").read_text(encoding="utf-8")
    assert f"``{line}``" in page, f"docs/installation.rst does not state {line}"


def pool_lines() -> list[str]:
    """The pool extra's own requirements, beside the SDK the other extra declares too."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    return [line for line in extras["pool"] if line not in extras["opensandbox"]]


@pytest.mark.parametrize("line", pool_lines())
def test_the_installation_page_states_the_pool_extras_own_range(line: str) -> None:
    page = (REPO / "docs" / "installation.rst").read_text(encoding="utf-8")
    assert f"``{line}``" in page, f"docs/installation.rst does not state {line}"


# The README names the ranges of Airflow, common-ai and the SDK; the HTTP libraries' are on
# the installation page.
@pytest.mark.parametrize("line", declared_lines(only_the_sdk_from_the_extra=True))
def test_the_readme_states_each_declared_range_but_the_http_libraries(line: str) -> None:
    readme = (REPO / "README.rst").read_text(encoding="utf-8")
    assert f"``{line}``" in readme, f"README.rst does not state {line}"


@pytest.mark.parametrize("requirement", declared(), ids=str)
def test_every_declared_range_stops_below_a_major_release(requirement: Requirement) -> None:
    # A new major release may break the API the package uses; the matrix must prove it first.
    (upper,) = [Version(spec.version) for spec in requirement.specifier if spec.operator == "<"]
    (lower,) = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    assert upper.release[1:] in ((), (0,)) and upper > lower, requirement


@pytest.mark.parametrize(
    "combination", [c for c in COMBINATIONS if not c.lowest], ids=lambda c: c.name
)
def test_each_combination_is_pinned_at_its_own_versions(combination: Combination) -> None:
    pins = pins_of(combination.pins)
    if combination.airflow == combination.line:
        assert Version(pins["apache-airflow"]).release[:2] == Version(combination.airflow).release
    else:
        assert pins["apache-airflow"] == combination.airflow
    assert pins["opensandbox"] == combination.sdk
    assert pins["apache-airflow-providers-common-ai"] == combination.common_ai


def test_the_floors_combination_pins_each_declared_requirement_at_its_floor() -> None:
    # What proves a floor: the matrix runs every check with each declared requirement at the
    # lowest version its range allows.
    (floors,) = [c for c in COMBINATIONS if c.lowest]
    pins = pins_of(floors.pins)
    for requirement in declared():
        (lower,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        assert Version(pins[canonicalize_name(requirement.name)]) == Version(lower), requirement


@pytest.mark.parametrize("combination", COMBINATIONS, ids=lambda c: c.name)
def test_each_combination_is_pinned_within_what_its_line_holds_back(
    combination: Combination,
) -> None:
    # A hold added without `make compat-pin` would leave the pins at the failing release.
    pins = pins_of(combination.pins)
    for line in HELD_BACK.get(combination.line, ()):
        requirement = Requirement(line)
        version = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version), f"{combination.name}: {version}, {line}"


def test_the_compat_pins_are_exactly_the_matrix() -> None:
    assert sorted(PINS_DIR.glob("*.txt")) == sorted(c.pins for c in COMBINATIONS)


@pytest.mark.parametrize("pin_file", PIN_FILES, ids=lambda path: path.name)
def test_no_pin_file_names_a_download_address(pin_file: Path) -> None:
    found = _ADDRESS.search(pin_file.read_text(encoding="utf-8"))
    assert found is None, f"{pin_file.name} has {found.group(0)!r}; pin by name and version only"
