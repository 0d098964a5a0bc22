"""kio message classes by (api key, version), and building them across versions.

Owns: `request_module` / `response_module` (the kio module of one message version) and `make`
(instantiate one of its classes from keyword fields, dropping the fields that version lacks), so
servers and clients write the newest field set once and serve every version. `make` is strict
about names: a field that no version of the class has (a misspelling) raises `EntityFieldError`,
as does a field this version requires that was not given — a response is never built with a
field silently missing. The other versions' fields are read from their source, not imported:
kio builds ~1 MiB of classes per version module, and importing every version of each message a
broker answers cost it megabytes (issue 25). Pure; thread-safe (caches fill idempotently).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType


@cache
def request_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.request)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


class EntityFieldError(TypeError):
    """`make` was given a field no version of the class has, or not given a required one."""


_VERSIONED = re.compile(r"^(?P<package>.+)\.v\d+\.(?P<kind>request|response|header|data)$")


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


@cache
def _required_names(cls: type) -> frozenset[str]:
    return frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


@cache
def _known_names(module_name: str, name: str) -> frozenset[str]:
    """Every field `name` has in any version of its message (kio's `<api>.v<N>.<kind>` modules);
    outside that layout, the fields of this module's class alone."""
    module = importlib.import_module(module_name)
    own = _field_names(getattr(module, name))
    matched = _VERSIONED.match(module_name)
    if matched is None:
        return own
    package = importlib.import_module(matched["package"])
    known = set(own)
    for version in pkgutil.iter_modules(package.__path__):
        sibling = f"{package.__name__}.{version.name}.{matched['kind']}"
        path = Path(package.__path__[0], version.name, f"{matched['kind']}.py")
        known |= _declared_fields(sibling, path, name)
    return frozenset(known)


def _declared_fields(module_name: str, path: Path, name: str) -> frozenset[str]:
    """The fields of class `name` in kio module `module_name`: from the class when the module is
    loaded, else from its source at `path`, importing it only without a source. A kio message
    class is a plain dataclass whose fields are its annotated names other than `ClassVar`s, one per
    line at the class body's indent (`_source_fields`)."""
    loaded = sys.modules.get(module_name)
    if loaded is None:
        try:
            return _source_fields(path.read_text(encoding="utf-8"), name)
        except OSError:
            pass
        try:
            loaded = importlib.import_module(module_name)
        except ImportError:
            return frozenset()
    cls = getattr(loaded, name, None)
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        return _field_names(cls)
    return frozenset()


_FIELD_LINE = re.compile(r"^    ([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(\S.*)$")


def _source_fields(source: str, name: str) -> frozenset[str]:
    """The annotated names of top-level `class <name>` in generated source, scanned line by line
    (not `ast`: CPython 3.11's parser keeps its recursion depth in per-interpreter state, and a
    parse on one thread while another compiles fails with "AST constructor recursion depth
    mismatch"). Lines inside triple-quoted strings are skipped."""
    fields: set[str] = set()
    inside = False  # within class `name`
    quoted = False  # within a triple-quoted string
    for line in source.splitlines():
        if quoted:
            quoted = line.count('"""') % 2 == 0
            continue
        if line[:1] not in ("", " ", "\t"):  # a top-level statement ends the class
            if inside:
                break
            inside = line.startswith(f"class {name}:") or line.startswith(f"class {name}(")
            continue
        if not inside:
            continue
        if line.count('"""') % 2 == 1:
            quoted = True
            continue
        found = _FIELD_LINE.match(line)
        if found and not found[2].startswith("ClassVar"):
            fields.add(found[1])
    return frozenset(fields)


def make(module: ModuleType, name: str, /, **fields: Any) -> Any:
    """Instantiate `module.name` with the keyword fields that class has; fields other versions
    have are dropped, a name no version has or a required field left out is an error."""
    cls = getattr(module, name)
    names = _field_names(cls)
    if not fields.keys() <= names:
        unknown = fields.keys() - _known_names(module.__name__, name)
        if unknown:
            raise EntityFieldError(f"{module.__name__}.{name} has no field {sorted(unknown)}")
        fields = {k: v for k, v in fields.items() if k in names}
    required = _required_names(cls)
    if not required <= fields.keys():
        missing = sorted(required - fields.keys())
        raise EntityFieldError(f"{module.__name__}.{name} needs field {missing}")
    return cls(**fields)


def known_fields(module: ModuleType, name: str) -> frozenset[str]:
    """The fields `make` accepts for `module.name`: those of any version of the class."""
    return _known_names(module.__name__, name)


def has_field(module: ModuleType, name: str, field: str) -> bool:
    return field in _field_names(getattr(module, name))
