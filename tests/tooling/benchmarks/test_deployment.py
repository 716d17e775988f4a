"""The benchmarks' backends need no Airflow metadata database for their deployment id."""

from __future__ import annotations

import os

import benchmarks


def test_a_bench_process_gets_a_deployment_of_its_own(monkeypatch) -> None:
    monkeypatch.delenv(benchmarks.DEPLOYMENT_VARIABLE, raising=False)
    benchmarks.use_a_deployment_of_its_own()

    assert os.environ[benchmarks.DEPLOYMENT_VARIABLE] == benchmarks.BENCH_DEPLOYMENT


def test_a_deployment_id_already_set_is_kept(monkeypatch) -> None:
    monkeypatch.setenv(benchmarks.DEPLOYMENT_VARIABLE, "platform-team")
    benchmarks.use_a_deployment_of_its_own()

    assert os.environ[benchmarks.DEPLOYMENT_VARIABLE] == "platform-team"
