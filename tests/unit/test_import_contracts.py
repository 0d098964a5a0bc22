"""The dependency direction of DESIGN.md's layout table, checked two ways.

1. import-linter's contracts from pyproject.toml, through its Python API (`lint-imports` in
   `infra/test` runs the same contracts from the command line).
2. A self-contained `ast` walk over our sources with DESIGN.md's "may import" column as a table:
   every import of one of our packages (absolute, relative, inside functions or TYPE_CHECKING
   blocks) must stay in the importer's component or go to one it may import.

Table semantics (documented choices):
- "may import" is transitive: a component may use what the components it may import may use
  (replication may import `records`, which `log` imports), mirroring a layered architecture.
- Modules directly under `brokers/` (`brokers.common.clock`, the assembling `brokers.app.standalone`, …) are shared
  by every `brokers` component except the pure `wire` codec.
- `handlers` may import all of `brokers` except controller internals: only the package
  `brokers.controller` itself (its public surface), not its submodules.
- `pier` (the CLI), `infra` and `tests` may import anything; nothing else may import them.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from importlinter import configuration
from importlinter.application import use_cases

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OURS = ("brokers", "gateway", "tenancy", "billing", "pier", "infra")
BROKER_COMPONENTS = (
    "wire",
    "records",
    "log",
    "server",
    "handlers",
    "replication",
    "controller",
    "coordinator",
    "client",
)
GATEWAY = ("brokers.wire", "brokers.client", "tenancy", "gateway")

# DESIGN.md, "Top-level layout", column "may import" (own component always allowed).
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "brokers.wire": (),
    "brokers.records": ("brokers.wire",),
    "brokers.log": ("brokers.records",),
    "brokers.server": ("brokers.wire",),
    "brokers.handlers": tuple(f"brokers.{c}" for c in BROKER_COMPONENTS),
    "brokers.replication": ("brokers.log", "brokers.client"),
    "brokers.controller": ("brokers.client", "brokers.wire"),
    "brokers.coordinator": ("brokers.log", "brokers.records"),
    "brokers.client": ("brokers.wire", "brokers.records"),
    "gateway": GATEWAY,
    "tenancy": (),
    "billing": ("brokers.client", "brokers.records", "tenancy"),
}


def component_of(module: str) -> str | None:
    """The row of MAY_IMPORT that governs `module`, or None when unrestricted or shared."""
    parts = module.split(".")
    if parts[0] == "brokers":
        return f"brokers.{parts[1]}" if len(parts) > 1 and parts[1] in BROKER_COMPONENTS else None
    return parts[0] if parts[0] in MAY_IMPORT else None


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
    if component is None:
        # Shared modules under brokers/ (clock, broker assembly) stay inside brokers.
        return top(importer) != "brokers" or top(imported) == "brokers"
    target = component_of(imported)
    if target is None:
        # Shared brokers/ modules serve every brokers component but the pure codec.
        return top(imported) == "brokers" == top(component) and component != "brokers.wire"
    if component == "brokers.handlers" and imported.startswith("brokers.controller."):
        return False  # controller internals
    return target in allowed_components(component)


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
    for root in ("brokers", "gateway", "tenancy", "billing"):
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            yield path, ".".join(parts[:-1] if is_package else parts), is_package


def test_our_sources_follow_the_layout_table() -> None:
    found = [
        violation
        for path, module, is_package in our_modules()
        for violation in violations(path.read_text(), module, is_package)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("brokers.wire.framing", "from brokers.records.batch import BatchHeader"),
        ("brokers.wire.framing", "from brokers.common.clock import Clock"),
        ("brokers.records.batch", "from ..log import segment"),
        ("brokers.log.segment", "import brokers.server.listener"),
        ("brokers.server.listener", "from brokers.handlers import produce"),
        ("brokers.handlers.metadata", "from brokers.controller.election import elect"),
        ("brokers.replication.fetcher", "def f():\n    from brokers.controller import x"),
        ("brokers.client.connection", "from brokers.log.log import Log"),
        ("brokers.coordinator.group", "from brokers.client import KafkaClient"),
        ("brokers.common.config", "from gateway.kafka import listener"),
        (
            "brokers.log.log",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gateway",
        ),
        ("tenancy.store", "from brokers.wire import errors"),
        ("tenancy.api.app", "from ...gateway import auth"),
        ("gateway.kafka.pairing", "from brokers.log import Log"),
        ("billing.rollups", "from brokers.server import listener"),
        ("billing.rollups", "from infra.stack import Stack"),
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
        ("brokers.handlers.produce", "from brokers.replication import ReplicaManager"),
        ("brokers.handlers.metadata", "from brokers.controller import ControllerView"),
        ("brokers.handlers.metadata", "from brokers.app.standalone import Broker"),
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


def test_table_forbids_everything_pyproject_forbids() -> None:
    """The two checks must not drift apart: the table is at least as strict as the contracts."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in contracts["contracts"]:
        assert contract["type"] == "forbidden", contract["name"]
        for source in contract["source_modules"]:
            for forbidden in contract["forbidden_modules"]:
                importer = f"{source}.some_module"
                assert not may_import(importer, f"{forbidden}.x"), (contract["name"], forbidden)


def test_import_linter_contracts_are_kept() -> None:
    """`lint-imports` in-process; its report (printed, so shown on failure) names broken imports."""
    configuration.configure()
    options = use_cases.read_user_options(str(REPO / "pyproject.toml"))
    assert len(options.contracts_options) >= 8
    assert use_cases.lint_imports(str(REPO / "pyproject.toml"), cache_dir=None, no_logo=True)
