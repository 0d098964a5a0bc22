"""Benchmark of log compaction: one full cleaning round over a ~1 GiB compacted log.

    .venv/bin/python infra/bench/cleaner.py [--size-gib 1.0] [--quick] [--codec none|lz4|...]

Writes a compacted partition of `--size-gib` of ~1 KiB records (values from a pool of random
bytes, so they do not compress) whose keys are drawn uniformly from `records / 10` keys: 10% of
the records are live, each key is updated about 10 times. The log is rolled so everything is
cleanable, then one round runs on this thread (`LogCleaner.clean_log`, default cleaner settings:
128 MiB offset map, no throttle). Printed to stdout and written to
`infra/bench/results/cleaner.json`: sizes, phase times (offset map, cleaning + swaps), MB/s over
the log size, records removed, and memory: the offset map's fixed size and the process's peak RSS
during the round minus its RSS before (VmHWM reset through /proc/self/clear_refs). The data was
just written, so reads mostly come from the page cache. `--quick` uses 64 MiB. Progress goes to
stderr. Blocking; run alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from brokers.common.clock import SYSTEM_CLOCK
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.log_cleaner import LogCleaner
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.records.batch import iter_headers
from brokers.records.builder import build_batch
from brokers.records.compression import CODEC_NAMES

RESULTS = Path(__file__).parent / "results" / "cleaner.json"
RECORD_BYTES = 1024
VALUE_BYTES = 1000  # plus key and framing: ~1 KiB per record
RECORDS_PER_BATCH = 100
SEGMENT_BYTES = 128 * 1024 * 1024
MIB = 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-gib", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="64 MiB instead of --size-gib")
    parser.add_argument("--codec", choices=sorted(CODEC_NAMES.values()), default="none")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    args = parser.parse_args()
    size = 64 * MIB if args.quick else int(args.size_gib * 1024 * MIB)
    codec = {name: code for code, name in CODEC_NAMES.items()}[args.codec]
    root = Path(tempfile.mkdtemp(prefix="pier-cleaner-", dir=args.dir))
    try:
        result = run(root, size, codec)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["codec"] = args.codec
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text + "\n")


def run(root: Path, size: int, codec: int) -> dict[str, Any]:
    config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=SEGMENT_BYTES)
    log = Log.open(root / "bench-0", config, clock=SYSTEM_CLOCK)
    records = size // RECORD_BYTES
    keys = max(records // 10, 1)
    started = time.monotonic()
    write(log, records, keys, codec)
    log.roll()
    written_s = time.monotonic() - started
    size_before, segments_before = log.size_bytes, len(log.segments)
    progress(
        f"wrote {size_before / MIB:.0f} MiB, {records} records, {keys} keys in {written_s:.1f}s"
    )

    marks: dict[str, float] = {}

    def mark(step: str) -> None:
        marks.setdefault(step, time.monotonic())

    cleaner = LogCleaner(
        root, clock=SYSTEM_CLOCK, config=CleanerConfig(),
        fault=mark,
    )  # fmt: skip
    cleaner.startup()
    rss_before = _status_kib("VmRSS")
    _reset_peak_rss()
    started = time.monotonic()
    stats = cleaner.clean_log(log)
    seconds = time.monotonic() - started
    peak = _status_kib("VmHWM")
    assert stats is not None
    progress(f"cleaned in {seconds:.1f}s")
    result = {
        "log_bytes_before": size_before,
        "log_bytes_after": log.size_bytes,
        "segments_before": segments_before,
        "segments_after": len(log.segments),
        "records": records,
        "keys": keys,
        "records_removed": stats.records_read - stats.records_kept,
        "write_seconds": round(written_s, 2),
        "clean_seconds": round(seconds, 2),
        "offset_map_seconds": round(marks["map"] - marks["plan"], 2),
        "clean_and_swap_seconds": round(started + seconds - marks["map"], 2),
        "mb_per_s": round(size_before / MIB / seconds, 1),
        "bytes_read": stats.map_bytes_read + stats.bytes_read,
        "bytes_written": stats.bytes_written,
        "offset_map_bytes": cleaner.cleaner.offset_map.memory_bytes,
        "offset_map_utilization": round(cleaner.cleaner.offset_map.utilization, 4),
        "rss_before_mib": round(rss_before / 1024, 1),
        "peak_rss_delta_mib": round((peak - rss_before) / 1024, 1),
    }
    log.close()
    return result


def write(log: Log, records: int, keys: int, codec: int) -> None:
    rng = random.Random(42)
    values = [rng.randbytes(VALUE_BYTES) for _ in range(256)]
    timestamp = SYSTEM_CLOCK.time_ms()
    for first in range(0, records, RECORDS_PER_BATCH):
        count = min(RECORDS_PER_BATCH, records - first)
        batch = build_batch(
            [(b"key-%09d" % rng.randrange(keys), rng.choice(values)) for _ in range(count)],
            base_timestamp=timestamp, compression=codec,
        )  # fmt: skip
        log.append_as_leader(batch, list(iter_headers(batch)), leader_epoch=0)
        if first % (RECORDS_PER_BATCH * 1000) == 0:
            progress(f"  {first * RECORD_BYTES / MIB:.0f} MiB")


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    """Linux: writing 5 to clear_refs resets VmHWM to the current RSS."""
    try:
        fd = os.open("/proc/self/clear_refs", os.O_WRONLY)
    except OSError:
        return
    try:
        os.write(fd, b"5")
    except OSError:
        pass
    finally:
        os.close(fd)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
