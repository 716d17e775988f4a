"""A Python function in a sandbox of its own: docs/decorator.rst's first example. The suite
runs its ``letter_counts`` task on the local stack (tests/integration/test_docs_examples.py)."""

# [START decorator]
from airflow.sdk import dag, task


@dag(schedule=None)
def counts():
    @task.opensandbox(image="python:3.12-slim", memory="1Gi")
    def letter_counts(words: str) -> dict:
        return {word: len(word) for word in words.split()}

    @task
    def total(counts: dict) -> int:
        return sum(counts.values())

    total(letter_counts("alpha beta gamma"))


counts()
# [END decorator]
