"""The tests' own helpers stay honest (issue 12): waiting for state goes through the one polling
helper, `tests/polling.py`, which retries only the exception types it is told mean "not yet";
no other module hand-writes a deadline loop, and no helper swallows every exception, so a broken
read never looks like a slow one.

Both checks read the source of every module under tests/ with `ast`, never import it. The poll-loop
check is a heuristic: a function whose own body (nested functions are judged on their own) has a
`while` loop, a `*.sleep(...)` call and a clock call (`monotonic()`, `time()`, `perf_counter()`,
`asyncio.timeout()`) is a hand-written poll loop. A swallowing handler is an `except:`,
`except Exception:` or `except BaseException:` whose body only passes, continues, breaks or returns
a constant, in a function that is not itself a test.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]
POLLING = TESTS / "polling.py"

# Every module polls through `tests.polling`; keep it that way.
POLL_LOOP_ALLOWLIST: dict[str, str] = {}
# No helper needs to swallow every exception; keep it that way.
SWALLOW_ALLOWLIST: dict[str, str] = {}

_CLOCKS = frozenset({"monotonic", "time", "perf_counter", "timeout"})
_BROAD = frozenset({"Exception", "BaseException"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef


def _own_nodes(scope: Scope) -> Iterator[ast.AST]:
    """The nodes of `scope`'s body, without the bodies of functions or classes inside it."""
    pending: list[ast.AST] = list(scope.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, _SCOPES):
            pending.extend(ast.iter_child_nodes(node))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def poll_loops(source: str) -> list[str]:
    """`name:line` of each function that polls with its own `while`/sleep/clock loop."""
    found = []
    for function in _functions(ast.parse(source)):
        nodes = list(_own_nodes(function))
        calls = {_called_name(n) for n in nodes if isinstance(n, ast.Call)}
        has_while = any(isinstance(n, ast.While) for n in nodes)
        if has_while and "sleep" in calls and calls & _CLOCKS:
            found.append(f"{function.name}:{function.lineno}")
    return found


def _is_broad(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(
        kind is None
        or (isinstance(kind, ast.Name) and kind.id in _BROAD)
        or (isinstance(kind, ast.Attribute) and kind.attr in _BROAD)
        for kind in kinds
    )


def _swallows(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass | ast.Continue | ast.Break):
        return True
    if isinstance(statement, ast.Return):
        return statement.value is None or isinstance(statement.value, ast.Constant)
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def swallowing_handlers(source: str) -> list[str]:
    """`name:line` of each broad handler outside test functions that drops what it caught."""
    found = []
    tree = ast.parse(source)
    scopes: list[tuple[str, Scope]] = [("<module>", tree)]
    scopes += [(f.name, f) for f in _functions(tree)]
    for name, scope in scopes:
        if name.startswith("test"):
            continue
        found += [
            f"{name}:{node.lineno}"
            for node in _own_nodes(scope)
            if isinstance(node, ast.ExceptHandler)
            and _is_broad(node)
            and all(_swallows(statement) for statement in node.body)
        ]
    return found


def _modules() -> Iterator[tuple[str, str]]:
    for path in sorted(TESTS.rglob("*.py")):
        if path != POLLING:
            yield path.relative_to(TESTS).as_posix(), path.read_text()


def test_no_module_but_tests_polling_hand_writes_a_poll_loop() -> None:
    offenders = {
        module: loops
        for module, source in _modules()
        if module not in POLL_LOOP_ALLOWLIST and (loops := poll_loops(source))
    }
    assert offenders == {}, (
        f"poll with tests.polling.wait_until / wait_until_async instead of a loop: {offenders}"
    )


def test_no_helper_swallows_every_exception() -> None:
    offenders = {
        module: handlers
        for module, source in _modules()
        if module not in SWALLOW_ALLOWLIST and (handlers := swallowing_handlers(source))
    }
    assert offenders == {}, (
        f"catch the specific exception that means 'not yet' (or pass it as retry_on=): {offenders}"
    )


def test_the_allowlists_name_only_modules_that_still_need_them() -> None:
    sources = dict(_modules())
    stale = [m for m in POLL_LOOP_ALLOWLIST if m not in sources or not poll_loops(sources[m])]
    stale += [
        m for m in SWALLOW_ALLOWLIST if m not in sources or not swallowing_handlers(sources[m])
    ]
    assert stale == [], f"converted or gone: remove from the allowlist {stale}"


# ---- the checks themselves -------------------------------------------------------------------

_POLL_LOOP = """
import asyncio, time
def wait_for(check):
    deadline = time.monotonic() + 5
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.1)
async def until(check):
    async with asyncio.timeout(5):
        while not check():
            await asyncio.sleep(0.01)
"""

_NOT_POLL_LOOPS = """
import time
def paced(producer):
    while producer.running:
        time.sleep(0.05)  # pacing, no clock: not a wait with a deadline
def outer():
    started = time.monotonic()
    def inner():
        while True:
            time.sleep(1)
    return started
"""

_SWALLOWING = """
def read():
    try:
        return fetch()
    except Exception:
        return None
def probe():
    try:
        fetch()
    except:
        pass
def drain(items):
    for item in items:
        try:
            use(item)
        except (ValueError, BaseException):
            continue
"""

_NOT_SWALLOWING = """
def read():
    try:
        return fetch()
    except KeyError:
        return None
def report(failures):
    try:
        fetch()
    except Exception as exc:
        failures.append(exc)
def test_broken_input_is_refused():
    try:
        fetch()
    except Exception:
        pass
"""


def test_poll_loops_are_found() -> None:
    assert sorted(poll_loops(_POLL_LOOP)) == ["until:8", "wait_for:3"]
    assert poll_loops(_NOT_POLL_LOOPS) == []


def test_swallowing_handlers_are_found() -> None:
    assert sorted(swallowing_handlers(_SWALLOWING)) == ["drain:16", "probe:10", "read:5"]
    assert swallowing_handlers(_NOT_SWALLOWING) == []
