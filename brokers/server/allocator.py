"""The C allocator's settings for a long-running server process (`pier broker`, `pier gateway`).

Owns: `keep_heap()`, called once at start-up. Requests of up to a few MiB (a producer's 1 MiB
batches) are read into buffers of their size, decoded, validated and freed, several alive at
once. With glibc's defaults such a buffer above the dynamic mmap threshold is mapped and unmapped
each time, and below it the heap's top is trimmed back to the kernel whenever more than twice the
threshold is free, so the next request faults every page in again (measured, 1 KiB records in
1 MiB produce requests: ~280,000 minor faults per 600 MB and 2.0-2.5 CPU-s per GB, against ~500
and 0.7-1.0 with the settings below; docs/benchmarks.md, "Produce requests without page faults").
`keep_heap` sets glibc's `M_MMAP_THRESHOLD` (`MMAP_THRESHOLD_BYTES`: buffers below it come from
the heap and go back to it) and `M_TRIM_THRESHOLD` (`TRIM_THRESHOLD_BYTES`: the heap keeps up to
that much free memory instead of handing it back). The cost is memory the process keeps after a
burst: at most what its largest burst used, bounded by `queued.max.request.bytes` and the trim
threshold. A setting the operator made in the environment (`MALLOC_MMAP_THRESHOLD_`,
`MALLOC_TRIM_THRESHOLD_`) is left as it is; on a C library without `mallopt` (musl) nothing
changes. Call it from the main thread before the server starts; not thread-safe.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable, Mapping

log = logging.getLogger("pier.server")
M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit)
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
_ENVIRONMENT = {
    M_MMAP_THRESHOLD: ("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD_BYTES),
    M_TRIM_THRESHOLD: ("MALLOC_TRIM_THRESHOLD_", TRIM_THRESHOLD_BYTES),
}


def keep_heap(environ: Mapping[str, str] = os.environ) -> dict[str, int]:
    """Apply the settings the environment does not make itself; what was set (name → bytes)."""
    mallopt = _mallopt()
    if mallopt is None:
        return {}
    applied: dict[str, int] = {}
    for parameter, (variable, value) in _ENVIRONMENT.items():
        if variable in environ:
            continue
        if mallopt(parameter, value) == 1:
            applied[variable.lower().strip("_")] = value
    if applied:
        log.info(
            "event=allocator_settings %s",
            " ".join(f"{name}={value}" for name, value in applied.items()),
        )
    return applied


def _mallopt() -> Callable[[int, int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int)
    function.restype = ctypes.c_int
    return function
