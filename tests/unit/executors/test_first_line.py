"""The executor's first Airflow line, 3.3: before it, importing the executor fails with a
sentence that says so and what to use instead. Runs on every line of the compatibility matrix,
where the earlier lines refuse for real."""

from __future__ import annotations

import importlib
import sys

import airflow
import pytest

REFUSAL = "The OpenSandboxExecutor needs Airflow 3.3 or later, and this is Airflow {}:"


def _import_afresh(monkeypatch: pytest.MonkeyPatch) -> object:
    for name in [n for n in sys.modules if n.startswith("opensandbox_provider.executors")]:
        monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("opensandbox_provider.executors")


@pytest.mark.parametrize("version", ["2.11.0", "3.0.6", "3.2.2"])
def test_before_airflow_3_3_the_executor_refuses_to_load_saying_why(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    monkeypatch.setattr(airflow, "__version__", version)
    with pytest.raises(ImportError) as raised:
        _import_afresh(monkeypatch)
    assert str(raised.value).startswith(REFUSAL.format(version))
    assert "OpenSandboxOperator or @task.opensandbox" in str(raised.value)


@pytest.mark.skipif(
    tuple(map(int, airflow.__version__.split(".")[:2])) < (3, 3),
    reason="the refusal itself is what this line shows, in the test below",
)
@pytest.mark.parametrize("version", ["3.3.0", "3.4.0b2"])
def test_from_airflow_3_3_on_the_executor_loads(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    monkeypatch.setattr(airflow, "__version__", version)
    assert _import_afresh(monkeypatch).OpenSandboxExecutor.__name__ == "OpenSandboxExecutor"


def test_this_airflow_loads_the_executor_or_refuses_as_its_line_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if tuple(map(int, airflow.__version__.split(".")[:2])) >= (3, 3):
        assert _import_afresh(monkeypatch).OpenSandboxExecutor
        return
    with pytest.raises(ImportError, match=f"^{REFUSAL.format(airflow.__version__)}"):
        _import_afresh(monkeypatch)
