"""The release's version, changelog and classifiers agree with each other and with the docs."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.specifiers import SpecifierSet

import opensandbox_provider
from opensandbox_provider.get_provider_info import get_provider_info

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_CLASSIFIERS = ("Framework :: Apache Airflow", "Framework :: Apache Airflow :: Provider")


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def python_versions_tested() -> list[str]:
    """The Python row of the table of versions this release was tested with."""
    text = (REPO / "docs" / "installation.rst").read_text(encoding="utf-8")
    (row,) = re.findall(r"^\s+\* - Python\n\s+- (.+)$", text, re.MULTILINE)
    return [version.strip() for version in row.split(",")]


def test_the_package_airflow_and_the_distribution_report_one_version() -> None:
    version = project()["version"]
    assert opensandbox_provider.__version__ == version
    # What Airflow shows for the provider is the installed distribution's version.
    assert distribution("airflow-provider-opensandbox").version == version
    assert "versions" not in get_provider_info()


def test_the_changelog_opens_with_the_version_being_released() -> None:
    text = (REPO / "docs" / "changelog.rst").read_text(encoding="utf-8")
    headings = re.findall(r"^(\d+\.\d+\.\d+)\n-+$", text, re.MULTILINE)
    assert headings, "docs/changelog.rst has no release heading"
    assert headings[0] == project()["version"]
    assert len(headings) == len(set(headings)), "a release is listed twice"


def test_the_python_classifiers_name_exactly_the_versions_the_suite_ran_on() -> None:
    declared = [
        c.rsplit(" :: ", 1)[1]
        for c in project()["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    tested = python_versions_tested()
    assert declared == tested
    assert all(SpecifierSet(project()["requires-python"]).contains(v) for v in tested)


def test_the_classifiers_name_airflow_and_its_provider_framework() -> None:
    assert set(AIRFLOW_CLASSIFIERS) <= set(project()["classifiers"])


def test_the_license_file_is_the_apache_license_the_metadata_names() -> None:
    assert project()["license"] == "Apache-2.0"
    assert project()["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
