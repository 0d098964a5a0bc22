"""Shared parts of the stream-processing tests: topics, a paced input feeder, an output reader,
and stream applications run as child processes.

- `create_topics` makes topics through confluent-kafka's AdminClient and waits until every
  partition has a leader (the same call on Pier and on Apache Kafka).
- `Feeder` produces a known list of (key, value) records from a thread at a steady pace
  (idempotent, acks=all), so an application is mid-run while the test kills it.
- `OutputReader` reads a topic from the beginning with `isolation.level=read_committed` (or
  read_uncommitted) and keeps every record it has seen; `drain` reads what is there now.
- `App` is one application process (its stdout and stderr in one log file), started through
  `infra.process.spawn` (killed with the test run if pytest dies), killed with SIGKILL or stopped
  with SIGTERM by PID.
Blocking; each object belongs to the thread that made it, except `Feeder`'s own thread.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from infra import process as proc
from tests.polling import wait_until

SETTLE_S = 60.0
# A partition's leader not elected yet, or a topic not in the metadata yet.
METADATA_SETTLING = (KafkaException,)


def create_topics(bootstrap: str, topics: Mapping[str, tuple[int, int]]) -> None:
    """Create `{name: (partitions, replication factor)}` and wait until every partition is led."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, count, rf) for name, (count, rf) in topics.items()]
    for future in admin.create_topics(new, operation_timeout=30).values():
        future.result(timeout=60)

    def all_led() -> bool:
        metadata = admin.list_topics(timeout=5)
        for name, (count, _) in topics.items():
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None or len(topic.partitions) != count:
                return False
            if any(p.leader < 0 or p.error is not None for p in topic.partitions.values()):
                return False
        return True

    wait_until(all_led, what=f"topics {sorted(topics)} led", timeout=SETTLE_S)


class Feeder:
    """Produces `records` in order, `per_second` at most, from a thread; `finish` flushes."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        records: Sequence[tuple[str | None, str]],
        *,
        per_second: float,
    ) -> None:
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
            }
        )
        self._topic = topic
        self._records = list(records)
        self._pace = 1.0 / per_second
        self.sent = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)
        self._thread.start()

    def _delivered(self, error: object, _message: object) -> None:
        if error is not None:
            self.failed.append(str(error))

    def _run(self) -> None:
        for key, value in self._records:
            if self._stop.is_set():
                return
            self._producer.produce(self._topic, value.encode(), key, on_delivery=self._delivered)
            self._producer.poll(0)
            self.sent += 1
            self._stop.wait(self._pace)  # pacing the input, not waiting for any state

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def finish(self, timeout: float = 120.0) -> None:
        """Wait until every record is sent, then until each is acknowledged."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"feeder still sending after {timeout:.0f} s"
        assert self._producer.flush(timeout) == 0, "input records not acknowledged"
        assert self.failed == [], f"input records failed: {self.failed[:5]}"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(30)


@dataclass(frozen=True, slots=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class OutputReader:
    """Every record of `topic` from the beginning, in partition order, as far as `drain` read."""

    bootstrap: str
    topic: str
    isolation: str = "read_committed"
    records: list[Record] = field(default_factory=list)
    _consumer: Consumer | None = field(default=None, repr=False)

    def _open(self) -> Consumer:
        if self._consumer is None:
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": f"reader-{self.topic}-{self.isolation}",
                    "enable.auto.commit": False,
                    "isolation.level": self.isolation,
                }
            )
            metadata = consumer.list_topics(self.topic, timeout=10)
            count = len(metadata.topics[self.topic].partitions)
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(count)])
            self._consumer = consumer
        return self._consumer

    def drain(self, max_s: float = 1.0) -> list[Record]:
        """Read until a poll returns nothing or `max_s` passed (the topic may never fall
        quiet while an application writes to it); the records read this time."""
        consumer = self._open()
        new: list[Record] = []
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            got: list[Record] = []
            for message in consumer.consume(1000, 0.2):
                error = message.error()
                # _PARTITION_EOF is not enabled; anything else unretriable is a real failure
                assert error is None or (error.retriable() and not error.fatal()), (
                    f"reading {self.topic}: {error}"
                )
                partition, offset = message.partition(), message.offset()
                if error is None and partition is not None and offset is not None:
                    got.append(Record(partition, offset, message.key(), message.value()))
            if not got:
                break
            new.extend(got)
        self.records.extend(new)
        return new

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class App:
    """One stream application process; `argv` is started again by `restart`."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str]):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, f"{self.name} runs"
        with self.log_path.open("a") as log:
            log.write(f"---- start {self.starts + 1}: {' '.join(self.argv)}\n")
        self.process = proc.spawn(self.argv, self.log_path, env=self.env)
        self.starts += 1

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def assert_running(self) -> None:
        assert self.process is not None, f"{self.name} never started"
        status = self.process.poll()
        assert status is None, f"{self.name} exited with status {status}; see {self.log_path}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL by PID, reaped."""
        if self.process is not None:
            proc.kill(self.process)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM by PID (SIGKILL after `timeout`)."""
        if self.process is not None:
            proc.terminate(self.process, timeout)
