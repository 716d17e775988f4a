"""The compatibility matrix: each supported Airflow line with each supported OpenSandbox SDK.

``make compat-pin`` writes each combination's pins (``requirements/compat/``); ``make compat``
builds each one's environment under ``.compat/`` and runs the checks of ``checks.py`` in it.
"""
