"""`make` learns the fields of a message's other versions from their source, without importing
them (issue 25: importing every version of each message a broker answers cost megabytes)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from brokers.wire import entities

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("api", ["fetch", "metadata", "produce", "create_topics", "list_offsets"])
def test_fields_read_from_source_equal_the_imported_classes(api: str) -> None:
    package = importlib.import_module(f"kio.schema.{api}")
    compared = 0
    for version in pkgutil.iter_modules(package.__path__):
        for kind in ("request", "response"):
            name = f"{package.__name__}.{version.name}.{kind}"
            path = Path(package.__path__[0], version.name, f"{kind}.py")
            module = importlib.import_module(name)
            sys.modules.pop(name)  # read as if never imported
            try:
                for cls in vars(module).values():
                    if (
                        isinstance(cls, type)
                        and dataclasses.is_dataclass(cls)
                        and cls.__module__ == name
                    ):
                        expected = frozenset(f.name for f in dataclasses.fields(cls))
                        found = entities._declared_fields(name, path, cls.__name__)
                        assert found == expected, (name, cls.__name__)
                        compared += 1
            finally:
                sys.modules[name] = module
    assert compared > 20


def test_checking_a_field_of_another_version_imports_no_other_version() -> None:
    program = """
import sys
sys.modules["hypothesis"] = None
from brokers.wire.entities import make, response_module
module = response_module(3, 12)  # Metadata v12
make(module, "MetadataResponse", throttle_time=0, brokers=(), cluster_id=None,
     controller_id=1, topics=(), cluster_authorized_operations=0)  # a v8-v10 field: dropped
print(sorted({m.split(".")[3] for m in sys.modules if m.startswith("kio.schema.metadata.v")}))
"""
    ran = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert ran.stdout.strip() == "['v12']"
