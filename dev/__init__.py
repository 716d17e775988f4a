"""Development tools that ``make`` runs: the local OpenSandbox stack and the local Airflow."""
