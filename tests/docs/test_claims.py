"""The claims table of docs/verification.rst: every test it cites exists, a run's outcomes are
recorded as pytest reported them, and the table's last column says what the runs showed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import run_summary

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import claims_table  # noqa: E402  (docs/_ext holds Sphinx extensions, not a package)


def test_every_claim_cites_a_test() -> None:
    # That each cited test exists is test_docs_build.py's test_every_test_the_docs_cite_exists.
    claims = claims_table.load_claims()
    assert claims
    uncited = [c["claim"] for c in claims if not claims_table.references(c["tests"])]
    assert not uncited, f"docs/claims.toml has claims that cite no test: {uncited}"


def _run(tests: dict[str, str], needs_stack: tuple[str, ...] = ()) -> dict:
    return {"tests": tests, "needs_stack": list(needs_stack)}


def test_a_claim_passes_on_a_kind_only_when_every_test_it_cites_passed_there() -> None:
    runs = {
        "stand-ins": _run(
            {"tests/a.py::test_one": "passed", "tests/a.py::test_two": "passed"},
            needs_stack=("tests/a.py::test_one", "tests/a.py::test_two"),
        ),
        "named-images": _run(
            {"tests/a.py::test_one": "passed", "tests/a.py::test_two": "failed"},
            needs_stack=("tests/a.py::test_one", "tests/a.py::test_two"),
        ),
    }
    assert claims_table.passed_on(["test_one"], runs) == "both"
    assert claims_table.passed_on(["test_one", "test_two"], runs) == "stand-ins"
    assert claims_table.passed_on(["tests/a.py"], runs) == "stand-ins"
    assert claims_table.passed_on(["test_three"], runs) == "not passed in a recorded run"


def test_a_claim_skipped_on_the_named_images_says_so() -> None:
    runs = {
        "stand-ins": _run({"tests/s.py::test_stall": "passed"}, ("tests/s.py::test_stall",)),
        "named-images": _run({"tests/s.py::test_stall": "skipped"}, ("tests/s.py::test_stall",)),
    }
    assert claims_table.passed_on(["test_stall"], runs) == "stand-ins (skipped on named images)"


def test_the_kubernetes_column_says_what_its_run_showed_and_leaves_the_docker_column_alone() -> (
    None
):
    stack = ("tests/k.py::test_create", "tests/k.py::test_pause", "tests/k.py::test_docker")
    docker = {"tests/k.py::test_create": "passed", "tests/k.py::test_pause": "passed"}
    runs = {
        "stand-ins": _run({**docker, "tests/k.py::test_docker": "passed"}, stack),
        "named-images": _run({**docker, "tests/k.py::test_docker": "passed"}, stack),
        "kubernetes": _run(
            {"tests/k.py::test_create": "passed", "tests/k.py::test_pause": "skipped"}, stack
        ),
    }
    assert claims_table.passed_on(["test_pause"], runs) == "both"
    assert claims_table.on_kubernetes(["test_create"], runs) == "passed"
    assert claims_table.on_kubernetes(["test_pause"], runs) == "skipped"
    # A test outside the Kubernetes run (one about the Docker stack itself).
    assert claims_table.on_kubernetes(["test_docker"], runs) == "not run"
    assert (
        claims_table.on_kubernetes(["test_create", "test_pause", "test_docker"], runs)
        == "1 passed, 1 skipped, 1 not run of its tests"
    )
    runs["kubernetes"]["tests"]["tests/k.py::test_create"] = "failed"
    assert claims_table.on_kubernetes(["test_create", "test_pause"], runs) == "failed"
    del runs["kubernetes"]
    assert claims_table.on_kubernetes(["test_create"], runs) == "no run recorded"


def test_a_claim_whose_tests_need_no_stack_says_so() -> None:
    runs = {"stand-ins": _run({"tests/unit/u.py::test_pure": "passed"})}
    assert claims_table.passed_on(["test_pure"], runs) == "no stack needed"
    assert claims_table.on_kubernetes(["test_pure"], runs) == "no stack needed"


def test_a_recorded_run_says_how_far_behind_head_it_is() -> None:
    run = {
        "commit": "0123456789abcdef",
        "finished_at": "2026-12-02T15:00:00Z",
        "images": {"execd": "opensandbox-test/execd:local"},
        "tests": {"a::test_x": "passed", "a::test_y": "skipped"},
    }
    sentence = claims_table.run_sentence("stand-ins", run, behind=3)
    assert "``0123456789ab`` (3 commits behind HEAD)" in sentence
    assert "1 passed, 1 skipped" in sentence
    assert "a commit this checkout does not have" in claims_table.run_sentence(
        "stand-ins", run, behind=None
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert claims_table.commits_behind(head) == 0
    assert claims_table.commits_behind("f" * 40) is None


def test_a_recorded_kubernetes_run_says_which_route_reached_execd() -> None:
    run = {
        "commit": "0123456789abcdef",
        "finished_at": "2026-12-07T06:00:00Z",
        "images": {"execd": "opensandbox-real/execd:4db3a99"},
        "route": "ingress gateway",
        "tests": {"a::test_x": "passed"},
    }
    assert "execd reached through the ingress gateway" in claims_table.run_sentence(
        "kubernetes", run, behind=0
    )
    del run["route"]
    assert "reached through" not in claims_table.run_sentence("kubernetes", run, behind=0)


def test_a_run_records_each_functions_worst_outcome(tmp_path: Path) -> None:
    """A real pytest run with the summary plugin: a parameter that fails fails the function,
    a fixture that fails is an error, a skip is a skip. A folder beside it has a conftest of
    its own, as the suite's folders do: pytest then compares plugins by hash."""
    (tmp_path / "beside").mkdir()
    (tmp_path / "beside" / "conftest.py").write_text("LOCAL = 1\n")
    (tmp_path / "beside" / "test_beside.py").write_text("def test_beside():\n    pass\n")
    (tmp_path / "test_sample.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.parametrize("n", [1, 2])
            def test_param(n):
                assert n == 1

            def test_ok():
                pass

            @pytest.mark.skip(reason="not here")
            def test_skipped():
                pass

            @pytest.fixture
            def broken():
                raise RuntimeError("no")

            def test_fixture_error(broken):
                pass
            """
        )
    )
    summary = tmp_path / "summary.json"
    (tmp_path / "conftest.py").write_text(
        "from pathlib import Path\n"
        "from tests.run_summary import RunSummary\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(\n"
        f"        RunSummary(selected_everything=True, path=Path({str(summary)!r})), 'summary')\n"
        "    config.addinivalue_line('markers', 'stack: needs the stack')\n"
        "def pytest_collection_modifyitems(items):\n"
        "    # As the suite's conftest marks a test that asks for the stack.\n"
        "    for item in items:\n"
        "        if item.name == 'test_ok':\n"
        "            item.add_marker('stack')\n"
    )
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    recorded = json.loads(summary.read_text())
    assert [name.split("::")[-1] for name in recorded["needs_stack"]] == ["test_ok"]
    tests = {
        name.split("::")[-1]: outcome
        for name, outcome in json.loads(summary.read_text())["tests"].items()
    }
    assert tests == {
        "test_param": "failed",
        "test_ok": "passed",
        "test_skipped": "skipped",
        "test_fixture_error": "error",
        "test_beside": "passed",
    }


def test_only_a_whole_suite_run_on_a_committed_tree_is_recorded(tmp_path: Path) -> None:
    summary = tmp_path / "run-summary.json"
    into = tmp_path / "recorded"
    base = {"kind": "stand-ins", "complete": True, "dirty": False, "tests": {}}
    summary.write_text(json.dumps({**base, "complete": False}))
    with pytest.raises(SystemExit, match="part of the suite"):
        run_summary.record(summary, into)
    summary.write_text(json.dumps({**base, "dirty": True}))
    with pytest.raises(SystemExit, match="uncommitted changes"):
        run_summary.record(summary, into)
    summary.write_text(json.dumps(base))
    assert run_summary.record(summary, into) == into / "stand-ins.json"
    assert json.loads((into / "stand-ins.json").read_text()) == base


def test_a_test_file_moved_after_a_run_is_found_in_that_run_by_its_old_path(tmp_path: Path) -> None:
    run = _run(
        {"tests/unit/test_old.py::test_one": "passed"}, ("tests/unit/test_old.py::test_one",)
    )
    (tmp_path / "stand-ins.json").write_text(json.dumps(run))
    moved = {"moved": {"tests/unit/pkg/test_new.py": "tests/unit/test_old.py"}}
    (tmp_path / claims_table.MOVED).write_text(json.dumps(moved))
    runs = claims_table.load_runs(tmp_path)
    assert claims_table.passed_on(["tests/unit/pkg/test_new.py::test_one"], runs) == "stand-ins"
    # Without the map, the file's new path is not in the run.
    (tmp_path / claims_table.MOVED).unlink()
    runs = claims_table.load_runs(tmp_path)
    assert claims_table.passed_on(["tests/unit/pkg/test_new.py"], runs) == (
        "not passed in a recorded run"
    )


def test_every_recorded_moved_file_exists_at_its_new_path() -> None:
    moved = json.loads((claims_table.RECORDED / claims_table.MOVED).read_text())["moved"]
    missing = [new for new in moved if not (ROOT / new).is_file()]
    assert missing == []
