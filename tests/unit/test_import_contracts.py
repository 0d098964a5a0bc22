"""The dependency direction of the code base, checked three ways, with no module exempt.

1. import-linter's contracts from pyproject.toml, through its Python API (`lint-imports` in
   `infra/test` runs the same contracts from the command line): the `brokers` layers, the
   forbidden edges of the other packages, and no cycles between sibling packages.
2. A self-contained `ast` walk over every module of `brokers`, `gateway`, `tenancy`, `billing`,
   `pier`, `infra` and `console` with the table below: every import of one of our packages (absolute,
   relative, inside functions or TYPE_CHECKING blocks) must stay in the importer's component or
   go to one it may import. A module outside every row fails the test.
3. The same walk as a module-level graph: any import cycle (TYPE_CHECKING and function-level
   imports included) fails, naming the cycle.

The layers, lowest first ("may import" is transitive: a component may use what the components it
may import may use):

| layer | component            | may import (besides itself)                                  |
|-------|----------------------|--------------------------------------------------------------|
| 0     | brokers.common       | nothing of ours (the base layer: clock, broker config)       |
| 0     | brokers.wire         | nothing of ours (the pure codec)                             |
| 1     | brokers.records      | wire, common                                                 |
| 1     | brokers.server       | wire, common (sockets, framing, dispatch, routes)            |
| 2     | brokers.log          | records                                                      |
| 2     | brokers.client       | records (and wire)                                           |
| 3     | brokers.replication  | log, client                                                  |
| 3     | brokers.coordinator  | log                                                          |
| 3     | brokers.controller   | client                                                       |
| 4     | brokers.zk           | controller, replication                                      |
| 4     | brokers.tiered       | replication (tiered storage: copier, remote reads)           |
| 5     | brokers.handlers     | server, zk, tiered, coordinator; controller's package surface |
| 6     | brokers.app          | handlers (the composition roots: standalone, zk_mode)        |
| 7     | pier                 | app, gateway, billing (the command line)                     |
| 8     | infra                | pier and everything below (launchers, benchmarks)            |
| -     | brokers (the package)| nothing                                                      |
| -     | gateway              | brokers.wire, brokers.client, tenancy (and console)          |
| -     | tenancy              | console (the admin API serves the operator console)          |
| -     | console              | nothing of ours (static pages and the routes serving them)   |
| -     | billing              | brokers.client, brokers.records, tenancy                     |

No `brokers.handlers` module imports `brokers.app` (handlers see narrow services, never the
broker); `tests` may import anything and nothing may import it.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from importlinter import configuration
from importlinter.application import use_cases

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OURS = ("brokers", "gateway", "tenancy", "billing", "pier", "infra", "console")
BROKER_COMPONENTS = (
    "common",
    "wire",
    "records",
    "server",
    "log",
    "client",
    "replication",
    "coordinator",
    "controller",
    "zk",
    "tiered",
    "handlers",
    "app",
)
GATEWAY = ("brokers.wire", "brokers.client", "tenancy", "gateway")

# The table of the docstring (own component always allowed).
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "brokers": (),
    "brokers.common": (),
    "brokers.wire": (),
    "brokers.records": ("brokers.wire", "brokers.common"),
    "brokers.server": ("brokers.wire", "brokers.common"),
    "brokers.log": ("brokers.records",),
    "brokers.client": ("brokers.records",),
    "brokers.replication": ("brokers.log", "brokers.client"),
    "brokers.coordinator": ("brokers.log",),
    "brokers.controller": ("brokers.client",),
    "brokers.zk": ("brokers.controller", "brokers.replication"),
    "brokers.tiered": ("brokers.replication",),
    "brokers.handlers": (
        "brokers.server",
        "brokers.zk",
        "brokers.tiered",
        "brokers.coordinator",
        "brokers.controller",
    ),
    "brokers.app": ("brokers.handlers",),
    "pier": ("brokers.app", "gateway", "billing"),
    "infra": ("pier",),
    "gateway": GATEWAY,
    "tenancy": ("console",),
    "console": (),
    "billing": ("brokers.client", "brokers.records", "tenancy"),
}


def component_of(module: str) -> str:
    """The row of MAY_IMPORT that governs `module`; KeyError when no row does."""
    parts = module.split(".")
    row = f"brokers.{parts[1]}" if parts[0] == "brokers" and len(parts) > 1 else parts[0]
    if row not in MAY_IMPORT:
        raise KeyError(f"{module} belongs to no row of the layer table")
    return row


def allowed_components(component: str) -> set[str]:
    """The transitive closure of `component`'s row."""
    seen: set[str] = set()
    pending = [component]
    while pending:
        for target in MAY_IMPORT.get(pending.pop(), ()):
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen | {component}


def top(module: str) -> str:
    return module.partition(".")[0]


def may_import(importer: str, imported: str) -> bool:
    if top(imported) not in OURS:
        return True  # stdlib and third-party packages are not ruled here
    component = component_of(importer)
    if component == "brokers.handlers" and imported.startswith("brokers.controller."):
        return False  # controller internals: handlers use the package's public surface
    return component_of(imported) in allowed_components(component)


def imported_modules(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute module) for every import in `source`, relative ones resolved.

    `from package import name` counts as importing `package.name` when that is one of our module
    files, so `from brokers.controller import election` is seen as reaching into the controller.
    """
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield node.lineno, submodule if is_our_module(submodule) else base


def is_our_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    return [
        f"{module}:{line} imports {imported}"
        for line, imported in imported_modules(source, module, is_package)
        if not may_import(module, imported)
    ]


def our_modules() -> Iterator[tuple[Path, str, bool]]:
    for root in OURS:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            yield path, ".".join(parts[:-1] if is_package else parts), is_package


def import_graph(
    sources: Mapping[str, tuple[str, bool]], known: set[str] | None = None
) -> dict[str, set[str]]:
    """module → the modules of ours it imports (any import statement anywhere in the file)."""
    known = set(sources) if known is None else known
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in sources.items():
        targets = {imported for _, imported in imported_modules(source, module, is_package)}
        graph[module] = {t for t in targets if t in known and t != module}
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One concrete cycle (a → … → a) per strongly connected component of more than one module
    (Tarjan's algorithm, iterative), each as the path around it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return [_path_around(graph, component) for component in components]


def _path_around(graph: Mapping[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, staying inside the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def our_sources() -> dict[str, tuple[str, bool]]:
    return {module: (path.read_text(), pkg) for path, module, pkg in our_modules()}


# --- the checks -----------------------------------------------------------------------------


def test_every_module_belongs_to_a_row() -> None:
    homeless = []
    for _, module, _ in our_modules():
        try:
            component_of(module)
        except KeyError:
            homeless.append(module)
    assert homeless == []


def test_our_sources_follow_the_layout_table() -> None:
    found = [
        violation
        for path, module, is_package in our_modules()
        for violation in violations(path.read_text(), module, is_package)
    ]
    assert found == []


def test_no_import_cycle_anywhere() -> None:
    found = [" → ".join(cycle) for cycle in cycles(import_graph(our_sources()))]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_no_handler_imports_the_composition_roots() -> None:
    found = [
        f"{module}:{line} imports {imported}"
        for path, module, is_package in our_modules()
        if module.startswith("brokers.handlers")
        for line, imported in imported_modules(path.read_text(), module, is_package)
        if imported == "brokers.app" or imported.startswith("brokers.app.")
    ]
    assert found == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("brokers.wire.framing", "from brokers.records.batch import BatchHeader"),
        ("brokers.wire.framing", "from brokers.common.clock import Clock"),
        ("brokers.common.config", "from brokers.wire import errors"),
        ("brokers.records.batch", "from ..log import segment"),
        ("brokers.log.segment", "import brokers.server.listener"),
        ("brokers.server.listener", "from brokers.handlers import produce"),
        ("brokers.server.dispatcher", "from brokers.replication import partition"),
        ("brokers.handlers.metadata", "from brokers.controller.election import elect"),
        ("brokers.handlers.produce", "from brokers.app.standalone import Broker"),
        (
            "brokers.handlers.fetch",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from brokers.app import runtime",
        ),
        ("brokers.replication.fetcher", "def f():\n    from brokers.controller import x"),
        ("brokers.replication.partition", "from brokers.zk.topics import ZkTopicAdmin"),
        ("brokers.controller.controller", "from brokers.replication import partition"),
        ("brokers.zk.topics", "from brokers.handlers import errors"),
        ("brokers.client.connection", "from brokers.log.log import Log"),
        ("brokers.coordinator.group", "from brokers.client import KafkaClient"),
        ("brokers.app.standalone", "from pier import cli"),
        ("brokers.common.config", "from gateway.kafka import listener"),
        (
            "brokers.log.log",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gateway",
        ),
        ("tenancy.store", "from brokers.wire import errors"),
        ("tenancy.api.app", "from ...gateway import auth"),
        ("gateway.kafka.pairing", "from brokers.log import Log"),
        ("gateway.kafka.session", "from pier import cli"),
        ("billing.rollups", "from brokers.server import listener"),
        ("billing.rollups", "from infra.stack import Stack"),
        ("pier.cli", "from infra.stack import Stack"),
    ],
)
def test_forbidden_import_is_detected(module: str, source: str) -> None:
    assert len(violations(source, module)) == 1


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("brokers.wire.framing", "import struct\nfrom .errors import ErrorCode"),
        ("brokers.records.batch", "from brokers.wire.messages import read_uvarint"),
        (
            "brokers.log.segment",
            "from brokers.records import batch\nfrom brokers.common.clock import Clock",
        ),
        ("brokers.replication.partition", "from brokers.records.validate import validate"),
        ("brokers.zk.topics", "from brokers.controller import zk_paths"),
        ("brokers.handlers.produce", "from brokers.replication import ReplicaManager"),
        ("brokers.handlers.metadata", "from brokers.controller import ControllerView"),
        ("brokers.handlers.describe_configs", "from brokers.zk.topics import ZkTopicAdmin"),
        ("brokers.app.zk_mode", "from brokers.handlers import leader_and_isr"),
        ("brokers.app.runtime", "from brokers.server.listener import Listener"),
        ("pier.cli", "from brokers.app.build import build_broker"),
        ("infra.stack", "from pier import cli"),
        (
            "gateway.kafka.pairing",
            "from brokers.client import KafkaClient\nfrom gateway.auth import x",
        ),
        ("billing.source", "from brokers.wire import errors"),
        ("tenancy.api.app", "from ..store import TenantStore"),
    ],
)
def test_allowed_import_passes(module: str, source: str) -> None:
    assert violations(source, module) == []


def test_a_module_outside_the_table_is_refused() -> None:
    with pytest.raises(KeyError):
        component_of("brokers.newcomer.thing")


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        (  # a TYPE_CHECKING import closing the loop is still a cycle
            {
                "brokers.app.standalone": ("from brokers.handlers import build", False),
                "brokers.handlers.build": (
                    "from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from brokers.app.standalone import Broker",
                    False,
                ),
            },
            [["brokers.app.standalone", "brokers.handlers.build", "brokers.app.standalone"]],
        ),
        (  # and so is one inside a function, three modules round
            {
                "gateway.a": ("import gateway.b", False),
                "gateway.b": ("def f():\n    from gateway.c import thing", False),
                "gateway.c": ("from gateway.a import other", False),
            },
            [["gateway.a", "gateway.b", "gateway.c", "gateway.a"]],
        ),
        (  # a chain is not a cycle
            {
                "gateway.a": ("import gateway.b", False),
                "gateway.b": ("import gateway.c", False),
                "gateway.c": ("import os", False),
            },
            [],
        ),
    ],
)
def test_cycles_are_found_and_named(
    sources: dict[str, tuple[str, bool]], expected: list[list[str]]
) -> None:
    graph = {
        module: {
            imported
            for _, imported in imported_modules(source, module, is_package)
            if imported in sources
        }
        - {module}
        for module, (source, is_package) in sources.items()
    }
    assert cycles(graph) == expected


def within(row: str, package: str) -> bool:
    return row == package or row.startswith(f"{package}.")


def test_table_forbids_everything_pyproject_forbids() -> None:
    """The two checks must not drift apart: the table is at least as strict as the contracts."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in contracts["contracts"]:
        if contract["type"] == "forbidden":
            for source in contract["source_modules"]:
                rows = [r for r in MAY_IMPORT if within(r, source)]
                for importer in rows:  # every row inside the contract's source package
                    for forbidden in contract["forbidden_modules"]:
                        for target in [r for r in MAY_IMPORT if within(r, forbidden)]:
                            assert not may_import(importer, target), (importer, target)
        elif contract["type"] == "layers":
            layers = [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]
            (container,) = contract["containers"]
            for depth, layer in enumerate(layers):
                for name in layer:
                    higher = [n for upper in layers[:depth] for n in upper]
                    for above in higher:
                        importer = f"{container}.{name}.some_module"
                        assert not may_import(importer, f"{container}.{above}.x"), (name, above)
                    siblings = [n for n in layer if n != name]
                    for sibling in siblings:
                        importer = f"{container}.{name}.some_module"
                        assert not may_import(importer, f"{container}.{sibling}.x"), (
                            name,
                            sibling,
                        )
            assert {n for layer in layers for n in layer} == set(BROKER_COMPONENTS)
        else:
            assert contract["type"] == "acyclic_siblings", contract["name"]


def test_import_linter_contracts_are_kept() -> None:
    """`lint-imports` in-process; its report (printed, so shown on failure) names broken imports."""
    configuration.configure()
    options = use_cases.read_user_options(str(REPO / "pyproject.toml"))
    assert len(options.contracts_options) >= 6
    assert use_cases.lint_imports(str(REPO / "pyproject.toml"), cache_dir=None, no_logo=True)
