"""Sphinx configuration for the airflow-provider-opensandbox documentation."""

from __future__ import annotations

import sys
from pathlib import Path

# Extensions of our own: the claims table of verification.rst, and the check that every Python
# example is included from a file the tests parse or run.
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

project = "airflow-provider-opensandbox"
author = "airflow-provider-opensandbox contributors"
copyright = "2026, airflow-provider-opensandbox contributors"

extensions = ["claims_table", "python_examples"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_theme_options = {"description": "OpenSandbox backend for common-ai's SandboxToolset"}
# make docs builds with -W: a malformed table, a broken reference or an orphan page is an
# error, so nothing is silently dropped from what readers see.
