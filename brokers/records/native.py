"""Which implementation of the byte loops runs: the C extension or its pure-Python twins.

Owns: importing `brokers.records._native` (compiled from `_native.c` by `pip install`, see
setup.py) and `IMPLEMENTATION`, "native" or "python". Without the extension (a checkout that was
never installed) the twins in `record_walk` and `zstd_frames` run, some 300 times slower per
record; one warning says so at import. `PIER_RECORDS_PURE_PYTHON=1` forces the twins (to measure
them). CI asserts "native", so a broken build cannot fall back silently. Thread-safe.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

log = logging.getLogger("pier.records")


def _load() -> ModuleType | None:
    if os.environ.get("PIER_RECORDS_PURE_PYTHON") == "1":
        return None
    try:
        from brokers.records import _native
    except ImportError as exc:
        log.warning("event=records_native_missing fallback=python error=%r", str(exc))
        return None
    return _native


NATIVE = _load()
IMPLEMENTATION = "python" if NATIVE is None else "native"
