"""A decorated function annotated with a type it imports only inside itself: docs/decorator.rst,
"What the function may be"."""

# [START annotations]
from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import dag, task

if TYPE_CHECKING:
    import decimal


@dag(schedule=None)
def invoice():
    @task.opensandbox(image="python:3.12-slim")
    def total(prices: list[decimal.Decimal | str]) -> str:  # imported below, in the sandbox
        import decimal

        return str(sum(decimal.Decimal(price) for price in prices))

    total(["1.10", "2.25"])


invoice()
# [END annotations]
