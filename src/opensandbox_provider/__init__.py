"""An OpenSandbox backend for the SandboxToolset of apache-airflow-providers-common-ai."""

from __future__ import annotations

__version__ = "1.1.0"

__all__ = ["__version__"]
