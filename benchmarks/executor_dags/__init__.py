"""Dag files of the bench's executor case, linked into its Airflows' Dags folders."""
