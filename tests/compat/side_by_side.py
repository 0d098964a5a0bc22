"""Running one Kafka tool command against Pier and against Apache Kafka, and comparing the outputs.

`Target` is one system under test (its name, bootstrap servers, broker id). `SideBySide.run`
starts the same tool command on both at once (two JVMs in parallel: a tool run is mostly JVM
start-up, ~1 s), with `{bootstrap}` and `{topic}`-style placeholders filled per target, and
returns both finished processes. `mask` makes an output comparable: the target's own bootstrap
address, the test's names, topic ids / UUIDs, timestamps, and the volatile columns the caller
names are replaced by fixed tokens. Stateless apart from the runner; blocking.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[2] / "infra" / "reference" / "kafka"
TOOL_TIMEOUT_S = 120.0
# Tool JVMs start quicker with the C1 compiler only and the serial collector (they run for ~1 s).
TOOL_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto"

_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_TOPIC_ID = re.compile(r"(TopicId:\s*)\S+")
_MILLIS = re.compile(r"\b1[6-9]\d{11}\b")  # epoch milliseconds, 2020-2033


@dataclass(frozen=True)
class Target:
    """One system the tools run against."""

    name: str  # "pier" or "kafka"
    bootstrap: str
    node_ids: tuple[int, ...] = (0,)
    data_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Ran:
    target: Target
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (
            f"[{self.target.name}] exit {self.returncode}: {' '.join(self.args)}\n"
            f"--- stdout\n{self.stdout}--- stderr\n{self.stderr}"
        )


@dataclass
class SideBySide:
    """Runs tool commands on Pier and Kafka in parallel; `env` is added to the tools' environment."""

    pier: Target
    kafka: Target
    env: Mapping[str, str] = field(default_factory=dict)

    def run(
        self,
        mode: str,
        tool_class: str,
        *args: str,
        stdin: str | None = None,
        fill: Mapping[str, Mapping[str, str]] | None = None,
    ) -> tuple[Ran, Ran]:
        """`mode` is "tool" (kafka-tools jars) or "server-tool" (kafka_2.13's, e.g. ConfigCommand).
        `{bootstrap}` in an argument becomes the target's; `fill[target.name]` adds more fields."""
        with ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(self._one, target, mode, tool_class, args, stdin, fill)
                for target in (self.pier, self.kafka)
            ]
            pier, kafka = (future.result() for future in futures)
        return pier, kafka

    def _one(
        self,
        target: Target,
        mode: str,
        tool_class: str,
        args: Sequence[str],
        stdin: str | None,
        fill: Mapping[str, Mapping[str, str]] | None,
    ) -> Ran:
        fields = {"bootstrap": target.bootstrap, **(fill or {}).get(target.name, {})}
        filled = tuple(arg.format_map(fields) for arg in args)
        ran = subprocess.run(
            [str(REFERENCE), mode, tool_class, *filled],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            check=False,
            # TZ: dates given to the tools (--to-datetime) are read in the local zone.
            env={**os.environ, "TZ": "UTC", "PIER_KAFKA_JAVA_OPTS": TOOL_JAVA_OPTS, **self.env},
        )
        return Ran(target, filled, ran.returncode, ran.stdout, ran.stderr)


def mask(text: str, target: Target, names: Mapping[str, str] | None = None) -> str:
    """`text` with the target's addresses, the given names (text -> token), ids and timestamps
    replaced, trailing blanks removed; lines keep their order."""
    for address in target.bootstrap.split(","):
        text = text.replace(address, "<bootstrap>")
    for directory in target.data_dirs:
        text = text.replace(str(directory), "<data-dir>")
    for name, token in sorted((names or {}).items(), key=lambda kv: -len(kv[0])):
        text = text.replace(name, token)
    text = _TOPIC_ID.sub(r"\1<topic-id>", text)
    text = _UUID.sub("<uuid>", text)
    text = _MILLIS.sub("<millis>", text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def table(text: str) -> list[list[str]]:
    """A whitespace-separated table as rows of cells, blank lines dropped."""
    return [line.split() for line in text.splitlines() if line.strip()]


def masked_pair(pier: Ran, kafka: Ran, names: Mapping[str, str]) -> tuple[str, str]:
    """Both stdouts, masked."""
    return mask(pier.stdout, pier.target, names), mask(kafka.stdout, kafka.target, names)


def assert_same(
    pier: Ran, kafka: Ran, names: Mapping[str, str], *, sort_lines: bool = False
) -> str:
    """Same exit status and same masked stdout (lines sorted when the tool's own order comes from
    a hash map, not from the server); returns Pier's masked stdout for further checks."""
    ours, theirs = masked_pair(pier, kafka, names)
    if sort_lines:
        ours, theirs = "\n".join(sorted(ours.splitlines())), "\n".join(sorted(theirs.splitlines()))
    assert (pier.returncode, ours) == (kafka.returncode, theirs), (
        f"Pier and Kafka differ:\n{pier.describe()}\n{kafka.describe()}"
    )
    return ours


def error_lines(ran: Ran, names: Mapping[str, str]) -> list[str]:
    """The masked lines of stdout and stderr naming an error or exception, stack frames dropped."""
    text = mask(ran.stdout + "\n" + ran.stderr, ran.target, names)
    return [
        line.strip()
        for line in text.splitlines()
        if ("Error" in line or "Exception" in line) and not line.lstrip().startswith("at ")
    ]
