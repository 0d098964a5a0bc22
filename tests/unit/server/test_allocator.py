"""`keep_heap`: request-sized buffers freed and allocated again reuse the heap's pages instead of
faulting them in each time (glibc's trim and mmap thresholds), and a setting made in the
environment is left to the environment.

Each case runs in a fresh interpreter (the settings are per process); page faults come from
`getrusage`. The control (no `keep_heap`) shows the pattern does fault with glibc's defaults, so
the test would notice the settings not taking effect.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from brokers.server.allocator import MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES, keep_heap

pytestmark = pytest.mark.unit
ROUNDS = 50
# Three 1 MiB buffers alive at once, as a produce request's frame, its decoded records and a
# validation buffer are; all freed; again.
_CHILD = f"""
import json, resource, sys
from brokers.server.allocator import keep_heap
applied = keep_heap() if sys.argv[1] == "kept" else {{}}
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    held = [bytearray(1 << 20) for _ in range(3)]
    del held
before = faults()
for _ in range({ROUNDS}):
    held = [bytearray(1 << 20) for _ in range(3)]
    del held
print(json.dumps({{"faults": faults() - before, "applied": applied}}))
"""


def _faults(mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_freed_request_buffers_are_reused_without_page_faults() -> None:
    kept, control = _faults("kept"), _faults("default")
    pages_per_round = 3 * (1 << 20) // 4096
    assert kept["applied"] == {
        "malloc_mmap_threshold": MMAP_THRESHOLD_BYTES,
        "malloc_trim_threshold": TRIM_THRESHOLD_BYTES,
    }
    assert control["faults"] >= ROUNDS * pages_per_round // 2  # type: ignore[operator]
    assert kept["faults"] < ROUNDS * 10  # type: ignore[operator]


def test_a_setting_in_the_environment_is_left_alone() -> None:
    applied = keep_heap({"MALLOC_TRIM_THRESHOLD_": "131072"})
    assert applied == {"malloc_mmap_threshold": MMAP_THRESHOLD_BYTES}
