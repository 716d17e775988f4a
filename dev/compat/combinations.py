"""Which versions the matrix covers, and where each combination's pins and environment live."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PINS_DIR = REPO / "requirements" / "compat"
ENVS_DIR = REPO / ".compat"

# The last 2.x line and every 3.x line; each resolves to its newest patch release.
AIRFLOW_LINES = ("2.11", "3.0", "3.1", "3.2", "3.3")
COMMON_AI = "1.0.0"
SDK_VERSIONS = ("1.1.0", "1.1.1")
# What the checks run with besides the package: the test runner, its asyncio plugin, and
# sphinx for the docs tests. Their ranges come from the dev group, so both sets agree.
TEST_TOOLS = ("pytest", "pytest-asyncio", "sphinx")
# Where an Airflow line itself fails with the newest releases of its own dependencies, which
# its metadata does not bound: a plain two-task Dag without this provider fails under
# `airflow dags test` there. Each line is held to what the next Airflow line bounds itself to.
HELD_BACK = {
    # 3.0's task SDK sends its JSON payloads without a content type, which newer FastAPI
    # refuses; Airflow 3.1 bounds FastAPI below 0.118.
    "3.0": ("fastapi<0.118",),
    # FastAPI 0.137 and later cannot build 3.2's execution API (its task state union names a
    # function as the discriminator field); Airflow 3.3 bounds FastAPI below 0.137. svcs 26.2
    # takes its registry off the app when its lifespan is collected, and 3.2's in-process
    # execution API, which `airflow dags test` runs, lets go of that lifespan.
    "3.2": ("fastapi<0.137", "svcs<26.2"),
}


@dataclass(frozen=True)
class Combination:
    airflow: str
    sdk: str

    @property
    def name(self) -> str:
        return f"airflow-{self.airflow}-sdk-{self.sdk}"

    @property
    def pins(self) -> Path:
        return PINS_DIR / f"{self.name}.txt"

    @property
    def env(self) -> Path:
        return ENVS_DIR / self.name

    @property
    def python(self) -> Path:
        return self.env / "bin" / "python"

    def requirements(self) -> list[str]:
        """What the combination fixes; the package's own ranges come from pyproject.toml."""
        return [
            f"apache-airflow~={self.airflow}.0",
            f"apache-airflow-providers-common-ai=={COMMON_AI}",
            f"opensandbox=={self.sdk}",
            *HELD_BACK.get(self.airflow, ()),
            *test_tools(),
        ]


COMBINATIONS = tuple(Combination(airflow, sdk) for airflow in AIRFLOW_LINES for sdk in SDK_VERSIONS)


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
