"""
No handler in the package catches everything and carries on.

Airflow raises its task timeout from SIGALRM in whatever frame the task is in, and it is an
``Exception`` on Airflow 2 (a ``BaseException`` on Airflow 3, as KeyboardInterrupt is): a
handler of ``Exception``, ``BaseException`` or everything that then goes on would swallow it,
and the task would run past its timeout or succeed. So every broad handler must re-raise what
it caught, as it is, on every path; a handler that carries on names what it catches.
"""

from __future__ import annotations

import ast
from pathlib import Path

import opensandbox_provider

PACKAGE = Path(opensandbox_provider.__file__).parent
BROAD = frozenset({"Exception", "BaseException"})
# Module and function of each broad handler that may carry on, with the reason.
ALLOWED = {
    # The lease thread's loop: it runs in its own thread, which neither the task timeout nor
    # KeyboardInterrupt reaches (Python delivers signals to the main thread only), and a
    # renewal thread that died on an unforeseen error would let the sandbox expire under a
    # task that still runs.
    ("sandbox/_lease.py", "_keep"),
    # An executor's try, on a thread of the scheduler's own: no task timeout is armed there,
    # and a try whose thread died on an unforeseen error would stay running in the scheduler
    # forever; the error becomes the try's failure, logged and reported once.
    ("executors/_try.py", "_to_the_end"),
    # The executor's watch of the tries' states, a thread of its own in the scheduler: one that
    # died on an unforeseen error would leave every later task marked failed in the UI to the
    # Task SDK's slower end; it logs the error and reads again at its next interval.
    ("executors/opensandbox.py", "_watch"),
    # The trigger's, which run as coroutines in the triggerer: no task timeout is armed there
    # and KeyboardInterrupt is not an Exception; cancellation (a BaseException) passes through.
    # The poll's rule is the trigger's promise: any failure is tolerated up to its grace, then
    # ends the wait with an event the worker acts on, rather than failing the task blind.
    ("triggers/opensandbox.py", "_wait"),
    ("triggers/opensandbox.py", "_renew_for_the_worker"),
    ("triggers/opensandbox.py", "_task_state"),
    # The deployment id's read: the task timeout is re-raised by name just above it, and every
    # other way reading or making the Variable fails (a database's, the API server's, a
    # serializer's) becomes the one error that says which option to set instead.
    ("_deployment.py", "_stored"),
    # The Sandboxes view runs in the api-server, where no task timeout is armed: one
    # connection failing in a way nobody foresaw is shown as broken, not the page as a 500.
    ("plugins/_app.py", "_listing"),
    # A metric sent through Airflow's Stats: the task timeout is re-raised by name just above
    # it, and whatever else a misconfigured metrics backend raises costs the metric, never
    # the task that was only being counted.
    ("_metrics.py", "_emit"),
    # The record of a snapshot's last use: the task timeout is re-raised by name just above
    # it, and whatever else the Variable store raises costs the record (logged), never the
    # task whose prepared environment is ready.
    ("sandbox/_snapshot_use.py", "_tolerating"),
}


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(name, ast.Name) and name.id in BROAD for name in names)


def _walk_body(statements: list[ast.stmt]) -> list[ast.AST]:
    """Every node of ``statements``, without entering nested functions or classes."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(statements)
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def _always_reraises(handler: ast.ExceptHandler) -> bool:
    """Whether the handler ends in a bare ``raise`` that nothing before it can skip."""
    last = handler.body[-1]
    if not (isinstance(last, ast.Raise) and last.exc is None):
        return False
    return not any(
        isinstance(node, ast.Return | ast.Break | ast.Continue | ast.Raise)
        for node in _walk_body(handler.body[:-1])
    )


def broad_handlers_that_carry_on(source: str) -> list[tuple[str, int]]:
    """The function and line of each broad handler in ``source`` that does not re-raise."""
    tree = ast.parse(source)
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in _walk_body(function.body):
            if isinstance(node, ast.ExceptHandler) and _is_broad(node):
                if not _always_reraises(node):
                    found.append((function.name, node.lineno))
    return found


def test_no_broad_handler_in_the_package_carries_on() -> None:
    offenders = []
    for module in sorted(PACKAGE.rglob("*.py")):
        name = module.relative_to(PACKAGE).as_posix()
        for function, line in broad_handlers_that_carry_on(module.read_text()):
            if (name, function) not in ALLOWED:
                offenders.append(f"{name}:{line} in {function}")
    assert offenders == [], (
        "These handlers catch Exception, BaseException or everything and carry on, which "
        "would swallow Airflow's task timeout; catch the errors meant, or re-raise: "
        + ", ".join(offenders)
    )


def test_every_allowed_handler_is_still_there() -> None:
    # An entry whose handler is gone would allow the next one written there unseen.
    present = set()
    for module in PACKAGE.rglob("*.py"):
        name = module.relative_to(PACKAGE).as_posix()
        present |= {(name, f) for f, _ in broad_handlers_that_carry_on(module.read_text())}
    assert ALLOWED <= present


def test_the_check_finds_each_shape_of_broad_handler_that_carries_on() -> None:
    source = """
def swallows():
    try:
        pass
    except Exception:
        return None

def bare():
    try:
        pass
    except:
        pass

def in_a_tuple():
    try:
        pass
    except (ValueError, BaseException) as e:
        log(e)

def translates():
    try:
        pass
    except Exception as e:
        raise ValueError("other") from e

def reraises_only_sometimes():
    try:
        pass
    except Exception as e:
        if e.args:
            return 1
        raise

def narrow():
    try:
        pass
    except (ValueError, OSError):
        return None

def cleans_up_and_reraises():
    try:
        pass
    except BaseException:
        close()
        raise
"""
    assert [name for name, _ in broad_handlers_that_carry_on(source)] == [
        "swallows",
        "bare",
        "in_a_tuple",
        "translates",
        "reraises_only_sometimes",
    ]
