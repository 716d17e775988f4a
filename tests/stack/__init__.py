"""Tests of the local OpenSandbox stack, whose code is in ``dev/stack``."""
