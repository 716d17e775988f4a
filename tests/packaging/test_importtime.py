"""The reading of ``-X importtime`` that the import budget rests on."""

from __future__ import annotations

from tests.packaging import importtime

# The shape `python -X importtime -c "import airflow; import json"` prints, numbers made small.
SAMPLE = """\
import time: self [us] | cumulative | imported package
import time:       300 |        300 | site
import time:       120 |        120 |     airflow.configuration
import time:      2000 |       2120 |   airflow.settings
import time:       880 |       3000 | airflow
import time:        40 |         40 |   json.decoder
import time:       210 |        250 | json
"""


def test_each_line_is_read_with_its_nesting() -> None:
    entries = importtime.imports(SAMPLE)
    assert [(e.name, e.depth, e.cumulative_us) for e in entries] == [
        ("site", 0, 300),
        ("airflow.configuration", 2, 120),
        ("airflow.settings", 1, 2120),
        ("airflow", 0, 3000),
        ("json.decoder", 1, 40),
        ("json", 0, 250),
    ]


def test_the_time_after_an_import_counts_only_the_top_level_imports_that_follow() -> None:
    assert importtime.seconds_after(SAMPLE, "airflow") == 250 / 1e6


def test_the_total_counts_every_top_level_import_once() -> None:
    assert importtime.top_level_seconds(SAMPLE) == (300 + 3000 + 250) / 1e6
