"""Sphinx configuration for the airflow-provider-opensandbox documentation."""

from __future__ import annotations

project = "airflow-provider-opensandbox"
author = "airflow-provider-opensandbox contributors"
copyright = "2026, airflow-provider-opensandbox contributors"

extensions: list[str] = []
exclude_patterns = ["_build"]
html_theme = "alabaster"
# The docs are self-contained; -W turns any broken reference or malformed table into a failure.
nitpicky = False
