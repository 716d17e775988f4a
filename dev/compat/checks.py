"""The checks run on each combination, each returning a :class:`CheckOutcome`.

``unit`` and ``connection_type`` need nothing; ``agent`` and ``attach_dag`` use the local
stack, so the runner gives them to :mod:`dev.compat.stack_phase`, under the stack's lock.
"""

from __future__ import annotations

import json

from dev.compat.combinations import Combination
from dev.compat.outcome import CheckOutcome, describe_counts, pytest_counts, tail
from dev.compat.running import fresh_home, run

PROVIDER = "airflow-provider-opensandbox"
HOOK_CLASS = "opensandbox_provider.hooks.opensandbox.OpenSandboxHook"
FORM_FIELDS = ["ca_bundle", "cpu_request", "memory_request", "request_timeout", "use_server_proxy"]
# Airflow 3.0 and 3.1 build the extras' form fields from wtforms fields the hook returns, and
# plain apache-airflow of those lines installs no wtforms: their form has the standard fields.
# 2.11 has wtforms through its Flask webserver; 3.2 and later read the provider info.
LINES_WITHOUT_A_FORM = ("3.0", "3.1")
# Generous bounds: a run far past them is stuck, not slow, on the two-core machines we use.
UNIT_TIMEOUT = 1200
CLI_TIMEOUT = 300
STACK_TEST_TIMEOUT = 900


def _pytest(combination: Combination, check: str, paths: list[str], *extra: str) -> CheckOutcome:
    home = fresh_home(combination, check)
    finished = run(
        [
            str(combination.python_path),
            "-m",
            "pytest",
            *paths,
            "-q",
            "-p",
            "no:cacheprovider",
            *extra,
        ],
        home,
        timeout=UNIT_TIMEOUT if check == "unit" else STACK_TEST_TIMEOUT,
    )
    counts = pytest_counts(finished.output)
    # Passing means pytest said so and ran something: an empty selection proves nothing.
    passed = finished.returncode == 0 and counts.get("passed", 0) > 0
    return CheckOutcome(
        check,
        passed,
        round(finished.seconds, 1),
        describe_counts(counts),
        "" if passed else tail(finished.output),
    )


# Tests whose subject a line does not have, left out there by name (the summary counts them
# as deselected). 3.1 does not mask a connection's extras as it loads the connection, so there
# is no masked use_server_proxy for route_through_server to avoid.
NOT_APPLICABLE = {
    "3.1": [
        "tests/unit/hooks/test_opensandbox.py::"
        "test_airflow_masks_use_server_proxy_false_as_a_string_which_route_through_server_avoids"
    ],
}


def unit(combination: Combination) -> CheckOutcome:
    deselected = [
        argument
        for test in NOT_APPLICABLE.get(combination.airflow, [])
        for argument in ("--deselect", test)
    ]
    # Two processes, as on the two-core machines the matrix runs on.
    return _pytest(
        combination,
        "unit",
        ["tests/unit", "tests/docs"],
        "-m",
        "not stack",
        "-n",
        "2",
        *deselected,
    )


def agent(combination: Combination) -> CheckOutcome:
    """A scripted pydantic-ai agent drives the four tools through SandboxToolset and our backend."""
    return _pytest(combination, "agent", ["tests/integration/test_agent.py"])


def attach_dag(combination: Combination) -> CheckOutcome:
    """The attach system-test Dag's three tasks under ``airflow dags test``."""
    return _pytest(combination, "attach_dag", ["tests/integration/test_attach_dag.py"])


def connection_type(combination: Combination) -> CheckOutcome:
    """``airflow providers list`` and ``hooks`` name ours, and the form has what the line reads."""
    home = fresh_home(combination, "connection_type")
    airflow = str(combination.env / "bin" / "airflow")
    listed = run([airflow, "providers", "list"], home, timeout=CLI_TIMEOUT)
    hooks = run([airflow, "providers", "hooks"], home, timeout=CLI_TIMEOUT)
    probe = run(
        [str(combination.python_path), "-m", "dev.compat.form_probe"], home, timeout=CLI_TIMEOUT
    )
    seconds = round(listed.seconds + hooks.seconds + probe.seconds, 1)
    problems = []
    if PROVIDER not in listed.output:
        problems.append("`airflow providers list` does not list the provider")
    if not any("opensandbox" in line and HOOK_CLASS in line for line in hooks.output.splitlines()):
        problems.append("`airflow providers hooks` has no opensandbox type with our hook")
    try:
        found = json.loads(probe.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        found = {}
        problems.append("the form probe printed no result")
    form = "standard fields only"
    if combination.airflow not in LINES_WITHOUT_A_FORM:
        form = f"{len(found.get('fields', []))} extras, password as API key"
        if found.get("fields") != FORM_FIELDS:
            problems.append(f"the form's extras are {found.get('fields')}, not {FORM_FIELDS}")
        if found.get("relabeling", {}).get("password") != "API key":
            problems.append("the form does not relabel the password as the API key")
    if problems:
        output = "\n".join(
            [*problems, tail(listed.output, 10), tail(hooks.output, 10), tail(probe.output, 10)]
        )
        return CheckOutcome("connection_type", False, seconds, "; ".join(problems), output)
    return CheckOutcome("connection_type", True, seconds, f"type listed; form: {form}")


NO_STACK_CHECKS = (unit, connection_type)
STACK_CHECKS = (agent, attach_dag)
