"""Round-trip driver for the `kcat` command-line client (librdkafka 2.0 built in).

Owns: producing a file of `key|value` lines (`-K` key delimiter, `-l` file input, `-z` codec,
fixed `-H` headers: kcat cannot vary headers per record, and librdkafka stamps every record with
its own CreateTime), reading back with `-C -o beginning -e -f` and a format string carrying
partition, offset, timestamp, key, headers and value, and ListOffsets by timestamp with `-Q`.
Blocking (runs kcat as a child process with a timeout); safe from any thread.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.e2e.client_drivers import NOT_FOUND
from tests.e2e.kafka_admin import StoredRecord
from tests.e2e.workload import Outgoing

KCAT_HEADERS: tuple[tuple[str, bytes], ...] = (("client", b"kcat"), ("dup", b"a"), ("dup", b"b"))
_FIELD = "\x1f"  # unit separator: never inside our keys, values or headers
_FORMAT = _FIELD.join(["%p", "%o", "%T", "%k", "%h", "%s"]) + "\\n"
_QUERY_LINE = re.compile(r"^(?P<topic>\S+) \[(?P<partition>\d+)\] offset (?P<offset>-?\d+)$")
_TIMEOUT_S = 120.0


def run_kcat(args: Sequence[str], bootstrap: str, security: Mapping[str, str] | None = None) -> str:
    settings = [
        arg for name, value in (security or {}).items() for arg in ("-X", f"{name}={value}")
    ]
    command = ["kcat", "-b", bootstrap, "-q", "-m", "30", *settings, *args]
    done = subprocess.run(command, capture_output=True, timeout=_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}: {done.stderr!r}"
    return done.stdout.decode()


class KcatDriver:
    """`security`: extra librdkafka settings (`-X name=value`, e.g. SASL for the gateway)."""

    name = "kcat"
    explicit_timestamps = False

    def __init__(self, security: Mapping[str, str] | None = None) -> None:
        self.security = dict(security or {})

    def produce(self, bootstrap: str, topic: str, records: Sequence[Outgoing], codec: str) -> None:
        headers = [
            arg for name, value in KCAT_HEADERS for arg in ("-H", f"{name}={value.decode()}")
        ]
        lines = b"".join(r.key + b"|" + r.value + b"\n" for r in records)
        with tempfile.TemporaryDirectory(prefix="pier-kcat-") as scratch:
            source = Path(scratch) / "records.txt"
            source.write_bytes(lines)
            args = ["-P", "-t", topic, "-K", "|", "-z", codec, *headers]
            args += ["-X", "acks=all", "-X", "linger.ms=5", "-l", str(source)]
            run_kcat(args, bootstrap, self.security)

    def read(self, bootstrap: str, topic: str, partitions: int) -> list[StoredRecord]:
        out = run_kcat(
            ["-C", "-t", topic, "-o", "beginning", "-e", "-f", _FORMAT], bootstrap, self.security
        )
        return [_parse_line(line) for line in out.splitlines() if line]

    def offsets_for_times(
        self, bootstrap: str, topic: str, targets: Mapping[int, int]
    ) -> dict[int, int]:
        queries = [arg for p, ts in targets.items() for arg in ("-t", f"{topic}:{p}:{ts}")]
        found: dict[int, int] = {}
        for line in run_kcat(["-Q", *queries], bootstrap, self.security).splitlines():
            match = _QUERY_LINE.match(line.strip())
            assert match is not None, f"unexpected kcat -Q line {line!r}"
            offset = int(match["offset"])
            found[int(match["partition"])] = offset if offset >= 0 else NOT_FOUND
        return found


def _parse_line(line: str) -> StoredRecord:
    partition, offset, timestamp, key, headers, value = line.split(_FIELD)
    return StoredRecord(
        partition=int(partition),
        offset=int(offset),
        key=key.encode(),
        value=value.encode(),
        headers=tuple(_parse_header(h) for h in headers.split(",") if h),
        timestamp_ms=int(timestamp),
    )


def _parse_header(text: str) -> tuple[str, bytes]:
    name, _, value = text.partition("=")
    return name, value.encode()
