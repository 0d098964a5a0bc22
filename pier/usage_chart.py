"""`pier billing usage --chart FILE.png`: a tenant's hourly usage drawn for a person.

Owns: summing the hourly rollup rows over principals, client ids and topics, and drawing bytes
in and out (MiB per hour) and requests per hour on two panels with matplotlib (installed with the
`bench` extra; without it the command says so and exits 2). Blocking; no shared state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

MIB = 2**20


def hourly_totals(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """hour (ISO) → {bytes_in, bytes_out, requests} summed over every other key."""
    totals: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(_MEASURES, 0))
    for row in rows:
        for measure in _MEASURES:
            totals[str(row["hour"])][measure] += int(row[measure])
    return dict(sorted(totals.items()))


_MEASURES = ("bytes_in", "bytes_out", "requests")


def draw(rows: Iterable[Mapping[str, Any]], tenant: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    totals = hourly_totals(rows)
    hours = list(totals)
    figure, (traffic, requests) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    traffic.plot(hours, [t["bytes_in"] / MIB for t in totals.values()], marker="o", label="in")
    traffic.plot(hours, [t["bytes_out"] / MIB for t in totals.values()], marker="o", label="out")
    traffic.set_ylabel("MiB per hour")
    traffic.legend()
    traffic.set_title(f"tenant {tenant}: usage per UTC hour")
    requests.bar(hours, [t["requests"] for t in totals.values()])
    requests.set_ylabel("requests")
    requests.tick_params(axis="x", labelrotation=45)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
