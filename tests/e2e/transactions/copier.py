"""The transactional copier: a consume-transform-produce loop with exactly-once output (KIP-98).

Run as `python tests/e2e/transactions/copier.py --bootstrap ... --status FILE` (it imports
nothing of this repository), one process per input partition, as Kafka's
`TransactionalMessageCopier` runs in its ducktape transactions_test. It reads one input partition
with `isolation.level=read_committed` from the group's committed offset, and copies it in
transactions of `--transaction-size` records to the output topic (partitioned by key, so a key's
records stay in one output partition): begin, produce, flush, send the input offsets to the
transaction (`send_offsets_to_transaction` with the consumer's group metadata), commit. Every
output record carries the header `txn` = `<transactional id>/<incarnation>/<n>`, so a reader can
tell which attempt wrote it, and `src` = `<input partition>:<input offset>`.

The 2nd transaction of each incarnation and every `--abort-every`-th after it is deliberately
aborted after its records were flushed (then the same input is copied again in the next one):
aborted data in the log that a read_committed reader must never see, whatever the kills did. An
abortable error aborts the same way; a fatal one (fenced) ends the process with status 3.
Connection-level errors (a broker bouncing) are librdkafka's to retry: they go to stderr only.

Status goes to the `--status` file, one JSON object per line, flushed at once (the test tails it):
`start` (position, remaining), `produced` (txn, count: flushed, not committed yet), `committed`
(txn, count, consumed since start), `aborted` (txn, count, reason), `done`, or `fatal`. The
process exits 0 when the partition is copied up to the high watermark it saw at start.
Single-threaded; librdkafka's threads stay inside the clients (its error callback only prints).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import IO, Any, TypeVar

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

T = TypeVar("T")
FATAL_EXIT = 3
CALL_TIMEOUT_S = 60.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--input-partition", type=int, required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--incarnation", type=int, default=0)
    parser.add_argument("--transaction-size", type=int, default=750)
    parser.add_argument("--transaction-timeout-ms", type=int, default=40_000)
    parser.add_argument("--abort-every", type=int, default=0, help="0: never; else at least 2")
    parser.add_argument("--batch-size", type=int, default=4096, help="librdkafka batch.size")
    parser.add_argument("--settings", default="{}", help="JSON: extra librdkafka settings")
    parser.add_argument("--status", required=True, help="file the JSON status lines go to")
    return parser.parse_args(argv)


class Status:
    def __init__(self, out: IO[str]) -> None:
        self._out = out

    def __call__(self, event: str, **fields: Any) -> None:
        self._out.write(json.dumps({"event": event, **fields}) + "\n")
        self._out.flush()


def retrying(call: Callable[[], T]) -> T:
    """librdkafka's contract for transactional calls: a retriable error means call again."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise


def client_error(error: KafkaError) -> None:
    """librdkafka's error callback: without it, connection errors would reach `consume` as
    messages. Fatal errors also fail the next transactional call, which ends the copier."""
    print(f"client error: {error.name()} {error.str()} fatal={error.fatal()}", file=sys.stderr)


class Copier:
    def __init__(self, args: argparse.Namespace, status: Status) -> None:
        self.args = args
        self.status = status
        settings = {
            "bootstrap.servers": args.bootstrap,
            "error_cb": client_error,
            **json.loads(args.settings),
        }
        self.producer = Producer(
            {
                **settings,
                "transactional.id": args.transactional_id,
                "transaction.timeout.ms": args.transaction_timeout_ms,
                "batch.size": args.batch_size,
                "linger.ms": 5,
            }
        )
        self.consumer = Consumer(
            {
                **settings,
                "group.id": args.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.input = TopicPartition(args.input_topic, args.input_partition)
        self.txn_number = 0
        self.consumed = 0  # records committed by this incarnation

    def run(self) -> int:
        # InitProducerId first: it completes (aborts) a transaction the previous incarnation left
        # open, so the committed offset read next is stable.
        retrying(lambda: self.producer.init_transactions(CALL_TIMEOUT_S))
        low, high = self.consumer.get_watermark_offsets(self.input, CALL_TIMEOUT_S, cached=False)
        position = self.committed_position(default=low)
        remaining = max(0, high - position)
        self.consumer.assign([TopicPartition(self.input.topic, self.input.partition, position)])
        self.status(
            "start", incarnation=self.args.incarnation, position=position, remaining=remaining
        )
        while remaining > 0:
            batch = self.next_batch(min(self.args.transaction_size, remaining), position)
            if self.copy(batch):
                position += len(batch)
                remaining -= len(batch)
                self.consumed += len(batch)
            else:  # aborted: copy the same records again
                self.consumer.seek(TopicPartition(self.input.topic, self.input.partition, position))
        self.status("done", consumed=self.consumed)
        self.producer.flush(CALL_TIMEOUT_S)
        self.consumer.close()
        return 0

    def committed_position(self, *, default: int) -> int:
        """The group's committed offset (OffsetFetch, stable under read_committed: KIP-447)."""
        [committed] = retrying(lambda: self.consumer.committed([self.input], CALL_TIMEOUT_S))
        if committed.error is not None:
            raise KafkaException(committed.error)
        return committed.offset if committed.offset >= 0 else default

    def next_batch(self, count: int, position: int) -> list[Message]:
        batch: list[Message] = []
        while len(batch) < count:
            for message in self.consumer.consume(count - len(batch), 1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                batch.append(message)
        # The input is never transactional, so its offsets are dense: a gap would be a lost record.
        offsets = [message.offset() for message in batch]
        assert offsets == list(range(position, position + count)), (position, offsets[:3])
        return batch

    def copy(self, batch: list[Message]) -> bool:
        """One transaction over `batch`; True when it committed."""
        self.txn_number += 1
        tag = f"{self.args.transactional_id}/{self.args.incarnation}/{self.txn_number}"
        every = self.args.abort_every  # the 2nd, the (2 + every)th, ...: each incarnation aborts
        deliberate = every > 0 and self.txn_number % every == 2 % every
        try:
            self.producer.begin_transaction()
            self.produce(batch, tag)
            if self.producer.flush(CALL_TIMEOUT_S) != 0:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush", retriable=False))
            self.status("produced", txn=tag, count=len(batch))
            if deliberate:
                self.abort(tag, len(batch), "deliberate")
                return False
            last = batch[-1].offset()
            assert last is not None
            offsets = [TopicPartition(self.input.topic, self.input.partition, last + 1)]
            group = self.consumer.consumer_group_metadata()
            retrying(
                lambda: self.producer.send_offsets_to_transaction(offsets, group, CALL_TIMEOUT_S)
            )
            retrying(lambda: self.producer.commit_transaction(CALL_TIMEOUT_S))
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if not error.txn_requires_abort():
                raise
            self.abort(tag, len(batch), error.str())
            return False
        self.status("committed", txn=tag, count=len(batch), consumed=self.consumed + len(batch))
        return True

    def produce(self, batch: list[Message], tag: str) -> None:
        for message in batch:
            headers: list[tuple[str, str | bytes | None]] = [
                ("txn", tag.encode()),
                ("src", f"{message.partition()}:{message.offset()}".encode()),
            ]
            while True:
                try:
                    self.producer.produce(
                        self.args.output_topic, message.value(), message.key(), headers=headers
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)

    def abort(self, tag: str, count: int, reason: str) -> None:
        retrying(lambda: self.producer.abort_transaction(CALL_TIMEOUT_S))
        self.status("aborted", txn=tag, count=count, reason=reason)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    with open(args.status, "a", encoding="utf-8") as out:
        status = Status(out)
        try:
            return Copier(args, status).run()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            status("fatal", error=error.str(), code=error.name(), fatal=error.fatal())
            return FATAL_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
