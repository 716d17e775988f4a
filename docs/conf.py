"""Sphinx configuration for the airflow-provider-opensandbox documentation."""

from __future__ import annotations

project = "airflow-provider-opensandbox"
author = "airflow-provider-opensandbox contributors"
copyright = "2026, airflow-provider-opensandbox contributors"

extensions: list[str] = []
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_theme_options = {"description": "OpenSandbox backend for common-ai's SandboxToolset"}
# make docs builds with -W: a malformed table, a broken reference or an orphan page is an
# error, so nothing is silently dropped from what readers see.
