"""Which versions the matrix covers, and where each combination's pins and environment live."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PINS_DIR = REPO / "requirements" / "compat"
ENVS_DIR = REPO / ".compat"

# The last 2.x line and every 3.x line; each resolves to its newest patch release.
AIRFLOW_LINES = ("2.11", "3.0", "3.1", "3.2", "3.3")
COMMON_AI = "1.0.0"
SDK_VERSIONS = ("1.1.0", "1.1.1")
# The interpreter line the project's own pins are resolved for, which every line runs on; the
# newest line also runs on the newer interpreters users have.
PYTHON = "3.11"
NEWER_PYTHONS = ("3.12", "3.13")
# The newest pre-releases the index serves, run as an early warning: recorded, never gating.
EARLY_AIRFLOW = "3.4.0b2"
EARLY_COMMON_AI = "1.1.0rc1"
# What the checks run with besides the package: the test runner, its asyncio plugin, xdist
# (the unit check shares its tests between two processes), and sphinx for the docs tests.
# Their ranges come from the dev group, so both sets agree.
TEST_TOOLS = ("pytest", "pytest-asyncio", "pytest-xdist", "sphinx")
# Where an Airflow line itself fails with the newest releases of its own dependencies, which
# its metadata does not bound: a plain two-task Dag without this provider fails under
# `airflow dags test` there. Each line is held to what the next Airflow line bounds itself to.
# cryptography 51 made MultiFernet a compiled class that takes no new attribute, and 2.11, 3.0
# and 3.1 mark the key they encrypt with by setting one on it: every Variable or connection
# written with a Fernet key fails there; Airflow 3.2 wraps the key in a class of its own.
_FERNET = "cryptography<51"
HELD_BACK = {
    "2.11": (_FERNET,),
    # 3.0's task SDK sends its JSON payloads without a content type, which newer FastAPI
    # refuses; Airflow 3.1 bounds FastAPI below 0.118. 3.0's ObjectStoragePath cannot be made
    # for a file:// URL with universal-pathlib 0.3 (its constructor refuses the protocol);
    # Airflow 3.1 bounds universal-pathlib below 0.3.
    "3.0": ("fastapi<0.118", "universal-pathlib<0.3", _FERNET),
    "3.1": (_FERNET,),
    # FastAPI 0.137 and later cannot build 3.2's execution API (its task state union names a
    # function as the discriminator field); Airflow 3.3 bounds FastAPI below 0.137. svcs 26.2
    # takes its registry off the app when its lifespan is collected, and 3.2's in-process
    # execution API, which `airflow dags test` runs, lets go of that lifespan.
    "3.2": ("fastapi<0.137", "svcs<26.2"),
}
FLOORS = "floors"


@dataclass(frozen=True)
class Combination:
    """One environment of the matrix.

    ``airflow`` is a line (``3.3``: its newest patch release) or an exact release
    (``3.4.0b2``). The ``floors`` combination fixes nothing: every requirement the package
    declares resolves to the lowest version its range allows, which proves the floors.
    """

    airflow: str
    sdk: str
    python: str = PYTHON
    common_ai: str = COMMON_AI
    lowest: bool = False
    gating: bool = True

    @property
    def line(self) -> str:
        return ".".join(str(part) for part in Version(self.airflow).release[:2])

    @property
    def name(self) -> str:
        if self.lowest:
            return FLOORS
        name = f"airflow-{self.airflow}-sdk-{self.sdk}"
        if self.common_ai != COMMON_AI:
            name += f"-common-ai-{self.common_ai}"
        if self.python != PYTHON:
            name += f"-py{self.python}"
        return name if self.gating else f"early-{name}"

    @property
    def pins(self) -> Path:
        return PINS_DIR / f"{self.name}.txt"

    @property
    def env(self) -> Path:
        return ENVS_DIR / self.name

    @property
    def python_path(self) -> Path:
        return self.env / "bin" / "python"

    def requirements(self) -> list[str]:
        """What the combination fixes; the package's own ranges come from pyproject.toml."""
        if self.lowest:
            # The test tools at the project's own pins: lowest-direct resolution applies to
            # them too, and their floors are not what this combination proves.
            return exact_test_tools()
        is_line = len(Version(self.airflow).release) == 2
        airflow = f"~={self.airflow}.0" if is_line else f"=={self.airflow}"
        return [
            f"apache-airflow{airflow}",
            f"apache-airflow-providers-common-ai=={self.common_ai}",
            f"opensandbox=={self.sdk}",
            *test_tools(),
        ]

    def held_back(self) -> tuple[str, ...]:
        """Upper bounds the Airflow line itself needs (``HELD_BACK``), given as constraints: the
        floors combination resolves its direct requirements to their lowest versions, and a
        held-back package is no requirement of ours."""
        return HELD_BACK.get(self.line, ())


COMBINATIONS = (
    *(Combination(airflow, sdk) for airflow in AIRFLOW_LINES for sdk in SDK_VERSIONS),
    *(Combination(AIRFLOW_LINES[-1], SDK_VERSIONS[-1], python=p) for p in NEWER_PYTHONS),
    Combination(AIRFLOW_LINES[0], SDK_VERSIONS[0], lowest=True),
    Combination(EARLY_AIRFLOW, SDK_VERSIONS[-1], common_ai=EARLY_COMMON_AI, gating=False),
)


def test_tools() -> list[str]:
    """The dev group's requirement of each of :data:`TEST_TOOLS`."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = {canonicalize_name(tool) for tool in TEST_TOOLS}
    return [
        line
        for line in project["dependency-groups"]["dev"]
        if canonicalize_name(Requirement(line).name) in wanted
    ]


def select(names: list[str] | None) -> tuple[Combination, ...]:
    """The combinations named (all when none are), refusing a name the matrix does not have."""
    if not names:
        return COMBINATIONS
    known = {combination.name: combination for combination in COMBINATIONS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"No combination {', '.join(unknown)}; choose from {', '.join(known)}.")
    return tuple(known[name] for name in names)


def exact_test_tools() -> list[str]:
    """Each of :data:`TEST_TOOLS` at the version requirements/pinned.txt pins for :data:`PYTHON`."""
    wanted = {canonicalize_name(tool) for tool in TEST_TOOLS}
    python = {"python_version": PYTHON, "python_full_version": f"{PYTHON}.0"}
    pinned = (REPO / "requirements" / "pinned.txt").read_text(encoding="utf-8").splitlines()
    found = []
    for line in pinned:
        if "==" not in line or line.lstrip().startswith("#"):
            continue
        requirement = Requirement(line)
        marker = requirement.marker
        if canonicalize_name(requirement.name) in wanted and (
            not marker or marker.evaluate(python)
        ):
            requirement.marker = None
            found.append(str(requirement))
    return found
