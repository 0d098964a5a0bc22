"""The copier's input and the checks its output must pass (ducktape's transactions_test, tightened).

Owns: seeding the input (`seed_input`: record i has key `k<i mod keys>` and the value
`<key>:<per-key sequence>`, on input partition `key index mod partitions`, so a key lives in one
input partition and its order is visible in the values), and the checks:
- `check_exact_copy`: read_committed output = input as a set, no duplicates, each key in one
  output partition in per-key sequence order;
- `check_atomic`: every transaction the copiers reported committed is visible whole; every
  transaction in the log is visible whole or not at all (a kill left it to the coordinator: it
  committed or aborted, never half); every deliberately aborted one is in the log (read_uncommitted)
  and invisible to read_committed;
- `check_concurrent`: the reader that ran during the copy saw, per partition and in order,
  exactly the committed output, and no record of an aborted transaction.
Pure except `seed_input` (blocking, its own producer); thread-safe.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from tests.e2e.transactions.readers import OutputRecord

KEYS = 120
SEED_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Seeded:
    topic: str
    partitions: int
    per_key: Mapping[bytes, int]  # key → how many records it has (sequences 0..n-1)

    @property
    def records(self) -> int:
        return sum(self.per_key.values())

    def per_partition(self) -> dict[int, int]:
        counts: Counter[int] = Counter()
        for key, count in self.per_key.items():
            counts[key_index(key) % self.partitions] += count
        return dict(counts)


def key_index(key: bytes) -> int:
    return int(key[1:])


def seed_input(
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    *,
    keys: int = KEYS,
    settings: Mapping[str, Any] | None = None,
) -> Seeded:
    """Produce `records` records (idempotent, acks=all) and wait until every one is acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "message.timeout.ms": int(SEED_TIMEOUT_S * 1000),
            **(settings or {}),
        }
    )
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    per_key: Counter[bytes] = Counter()
    for i in range(records):
        index = i % keys
        key = b"k%d" % index
        value = b"%s:%d" % (key, per_key[key])
        per_key[key] += 1
        while True:
            try:
                producer.produce(topic, value, key, index % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(SEED_TIMEOUT_S) == 0, "seed records left unacknowledged"
    assert not failures, f"{len(failures)} seed records failed, first: {failures[0]}"
    return Seeded(topic, partitions, dict(per_key))


def sequence_of(record: OutputRecord) -> tuple[bytes, int]:
    key, seq = record.value.split(b":")
    assert key == record.key, f"value {record.value!r} under key {record.key!r}"
    return key, int(seq)


def check_exact_copy(seeded: Seeded, committed: Sequence[OutputRecord]) -> None:
    """`committed`: the output read read_committed, in (partition, offset) order."""
    values = [r.value for r in committed]
    duplicates = len(values) - len(set(values))
    assert duplicates == 0, f"{duplicates} duplicates in the committed output"
    assert len(values) == seeded.records, (
        f"{len(values)} records in the committed output, {seeded.records} in the input"
    )
    sequences: dict[bytes, list[int]] = defaultdict(list)
    homes: dict[bytes, set[int]] = defaultdict(set)
    for record in committed:
        key, seq = sequence_of(record)
        sequences[key].append(seq)
        homes[key].add(record.partition)
    assert set(sequences) == set(seeded.per_key), "keys differ between input and output"
    for key, seen in sequences.items():
        assert len(homes[key]) == 1, f"key {key!r} in output partitions {sorted(homes[key])}"
        expected = list(range(seeded.per_key[key]))
        if seen != expected:
            wrong = next(
                (i for i, (a, b) in enumerate(zip(seen, expected, strict=False)) if a != b),
                min(len(seen), len(expected)),
            )
            raise AssertionError(
                f"key {key!r}: output sequence {seen[max(0, wrong - 2) : wrong + 3]} at index"
                f" {wrong}, input order {expected[max(0, wrong - 2) : wrong + 3]}"
            )


@dataclass(frozen=True)
class TransactionFigures:
    committed: int  # transactions visible to read_committed
    aborted_on_purpose: int
    aborted_by_crash: int  # in the log, not visible: a kill left them open, the coordinator aborted
    aborted_records: int  # records in the log that read_committed must skip


def check_atomic(
    committed: Sequence[OutputRecord],
    uncommitted: Sequence[OutputRecord],
    reported: Mapping[str, Mapping[str, int]],
    deliberate: Collection[str],
) -> TransactionFigures:
    """`reported`: the copiers' status, event (produced / committed / aborted) → transaction tag →
    record count; `deliberate`: the tags aborted on purpose (after their records were flushed)."""
    visible = Counter(r.txn for r in committed)
    logged = Counter(r.txn for r in uncommitted)
    produced, aborted = reported["produced"], reported["aborted"]
    assert "" not in visible, "a record without the copier's txn header in the output"
    for tag, count in reported["committed"].items():
        assert visible[tag] == count, f"committed {tag}: {visible[tag]} of {count} records visible"
        assert tag not in aborted, f"{tag} reported both committed and aborted"
    for tag, count in visible.items():
        assert count == logged[tag], f"{tag}: {count} of its {logged[tag]} records visible (torn)"
        if tag in produced:
            assert count == produced[tag], f"{tag}: {count} visible, {produced[tag]} sent"
    for tag in aborted:
        assert visible[tag] == 0, f"aborted {tag}: {visible[tag]} records visible"
    for tag in deliberate:  # the check has teeth: the aborted records are really in the log
        assert logged[tag] == produced[tag], f"{tag}: {logged[tag]} of {produced[tag]} in the log"
    hidden = [tag for tag in logged if visible[tag] == 0]
    return TransactionFigures(
        committed=len(visible),
        aborted_on_purpose=len(deliberate),
        aborted_by_crash=len(set(hidden) - set(aborted)),
        aborted_records=sum(logged[tag] for tag in hidden),
    )


def by_partition(records: Iterable[OutputRecord]) -> dict[int, list[OutputRecord]]:
    grouped: dict[int, list[OutputRecord]] = defaultdict(list)
    for record in records:
        grouped[record.partition].append(record)
    return dict(grouped)


def check_concurrent(
    seen: Sequence[OutputRecord],
    committed: Sequence[OutputRecord],
    uncommitted: Sequence[OutputRecord],
) -> None:
    """`seen`: the concurrent read_committed reader's records in the order it got them."""
    aborted = {r.txn for r in uncommitted} - {r.txn for r in committed}
    leaked = [r for r in seen if r.txn in aborted]
    assert not leaked, f"the concurrent reader saw {len(leaked)} aborted records, first {leaked[0]}"
    expected = by_partition(committed)
    got = by_partition(seen)
    for partition in sorted(set(expected) | set(got)):
        mine, theirs = got.get(partition, []), expected.get(partition, [])
        if mine != theirs:
            wrong = next(
                (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                min(len(mine), len(theirs)),
            )
            raise AssertionError(
                f"partition {partition}: the concurrent reader's record {wrong} of {len(mine)} is"
                f" {mine[wrong : wrong + 1]}, the committed output's of {len(theirs)} is"
                f" {theirs[wrong : wrong + 1]}"
            )
