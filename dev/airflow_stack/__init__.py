"""A local Airflow 3 for the demo and the browser test: its own home, components stopped by PID."""
