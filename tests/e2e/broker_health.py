"""Liveness checks the hostile-input tests run after every case.

Owns: "the broker still serves" (its process is alive and ApiVersions is answered both on a
connection opened before the abuse and on a fresh one) and reading a process's peak RSS.
Blocking; safe from any thread.
"""

from __future__ import annotations

from pathlib import Path

from infra.stack import BrokerProcess
from tests.e2e.raw_wire import RawConnection


def assert_still_serving(broker: BrokerProcess, sentinel: RawConnection) -> None:
    assert broker.process.poll() is None, f"broker exited with {broker.process.returncode}"
    sentinel.api_versions()
    with RawConnection(broker.host, broker.port) as fresh:
        fresh.api_versions()


def peak_rss_kib(pid: int) -> int:
    """VmHWM of a live process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")
