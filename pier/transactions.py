"""`pier transactions`: transaction administration over the Kafka protocol, via `brokers.client`.

Owns: the `transactions` subcommand, mirroring Kafka's kafka-transactions.sh (TransactionsCommand):
`list`, `describe`, `describe-producers`, `abort` and `find-hanging`, with Kafka's column names
and table layout (each cell padded to its column's width and followed by a tab), or JSON with
`--json`. `abort` ends a hanging transaction by writing an ABORT marker at the partition leader
(WriteTxnMarkers), identified by `--start-offset` (the producer's epochs then come from
DescribeProducers) or by `--producer-id/--producer-epoch/--coordinator-epoch`; like Kafka's tool
it prints nothing on success. Errors are one line `pier: error: ...` on stderr: exit 2 for usage
errors, 1 for operation errors (unknown transactional id, no such open transaction, broker
unreachable); never a traceback. Choices beyond Kafka's tool: `list` also filters by `--state`
and `--producer-id` (ListTransactions carries both), and giving both `--start-offset` and
`--producer-id` to `abort` is refused rather than one silently ignored.
Runs its own event loop per invocation; not thread-safe.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from brokers.client import ClientConfig, ClientError, TopicPartition
from brokers.client.cluster import Cluster, parse_bootstrap
from brokers.client.errors import BrokerResponseError, ClientConfigError
from brokers.client.transactions import (
    STATES,
    AbortSpec,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    abort_transaction,
    describe_producers,
    describe_transactions,
    find_hanging,
    find_open_transaction,
    list_transactions,
)
from brokers.wire.errors import ErrorCode
from pier.groups_cli import positive_float

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
COMMANDS = ("list", "describe", "describe-producers", "abort", "find-hanging")
LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCER_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)
JSON_KEYS: Mapping[Sequence[str], tuple[str, ...]] = {
    LIST_HEADERS: ("transactional_id", "coordinator_id", "producer_id", "state"),
    DESCRIBE_HEADERS: (
        "coordinator_id",
        "transactional_id",
        "producer_id",
        "producer_epoch",
        "state",
        "timeout_ms",
        "start_time_ms",
        "duration_ms",
        "partitions",
    ),
    PRODUCER_HEADERS: (
        "producer_id",
        "producer_epoch",
        "coordinator_epoch",
        "last_sequence",
        "last_timestamp_ms",
        "current_txn_start_offset",
    ),
    HANGING_HEADERS: (
        "topic",
        "partition",
        "producer_id",
        "producer_epoch",
        "coordinator_epoch",
        "start_offset",
        "last_timestamp_ms",
        "duration_min",
    ),
}
_BY_NAME = {state.lower(): state for state in STATES}
_REASONS = {
    ErrorCode.transactional_id_not_found: "the transactional id does not exist",
    ErrorCode.transactional_id_authorization_failed: "not authorized for the transactional id",
    ErrorCode.cluster_authorization_failed: "not authorized (needs CLUSTER_ACTION on the cluster)",
    ErrorCode.invalid_producer_epoch: "the producer has a newer epoch on the partition",
    ErrorCode.transaction_coordinator_fenced: (
        "the coordinator epoch is older than the one the partition has seen"
    ),
}


class OperationError(Exception):
    """An operation that cannot be done (exit status 1)."""


class UsageError(Exception):
    """Arguments argparse cannot check on its own (exit status 2)."""


def _bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high] (what the field it goes into can carry)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in [{low}, {high}]")
        return value

    return parse


INT32, INT64 = _bounded(-(2**31), 2**31 - 1), _bounded(-(2**63), 2**63 - 1)
PARTITION, MINUTES = _bounded(0, 2**31 - 1), _bounded(0, 2**31 // 60_000)
PRODUCER_ID, EPOCH = _bounded(0, 2**63 - 1), _bounded(0, 2**15 - 1)


# -- arguments ------------------------------------------------------------------------------------
def add_parser(commands: Any) -> None:
    """Register `transactions` on the `pier` subcommand set."""
    bootstrap = argparse.ArgumentParser(add_help=False)
    bootstrap.add_argument(
        "--bootstrap-server", "--bootstrap", dest="bootstrap", default=argparse.SUPPRESS,
        metavar="HOST:PORT", help="broker(s) to connect to, HOST:PORT[,HOST:PORT]",
    )  # fmt: skip
    parser = commands.add_parser(
        "transactions",
        help="transaction administration (like kafka-transactions.sh)",
        description="List and describe transactions, show the producers of a partition, find "
        "and abort hanging transactions.",
    )
    parser.add_argument(
        "--bootstrap-server", "--bootstrap", dest="bootstrap", default=None,
        metavar="HOST:PORT", help="broker(s) to connect to, HOST:PORT[,HOST:PORT]",
    )  # fmt: skip
    parser.add_argument("--timeout", type=positive_float, default=30.0, help="seconds")
    sub = parser.add_subparsers(dest="transactions_command", required=True, metavar="COMMAND")
    _add_list(sub, bootstrap)
    describe = sub.add_parser(
        "describe", parents=[bootstrap], help="describe the state of an active transactional id"
    )
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    describe.add_argument("--json", action="store_true", help="print JSON instead of a table")
    producers = sub.add_parser(
        "describe-producers",
        parents=[bootstrap],
        help="describe the states of active producers for a topic partition",
    )
    _add_partition(producers, required=True)
    producers.add_argument("--broker-id", type=INT32, help="ask this replica instead of the leader")
    producers.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_abort(sub, bootstrap)
    _add_find_hanging(sub, bootstrap)


def _add_list(sub: Any, bootstrap: argparse.ArgumentParser) -> None:
    listing = sub.add_parser("list", parents=[bootstrap], help="list transactions")
    listing.add_argument(
        "--state", type=_states, action="extend", default=[], metavar="STATE[,STATE]",
        help=f"only transactions in these states ({', '.join(STATES)})",
    )  # fmt: skip
    listing.add_argument(
        "--producer-id", type=_producer_ids, action="extend", default=[], metavar="ID[,ID]",
        help="only transactions of these producer ids",
    )  # fmt: skip
    listing.add_argument(
        "--duration-filter", "--duration-ms", dest="duration_ms", type=INT64, default=-1,
        metavar="MS", help="only transactions running longer than MS milliseconds (< 0: all)",
    )  # fmt: skip
    listing.add_argument(
        "--transactional-id-pattern", default=None, metavar="REGEX",
        help="only transactional ids matching this regular expression (evaluated by the broker)",
    )  # fmt: skip
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_abort(sub: Any, bootstrap: argparse.ArgumentParser) -> None:
    abort = sub.add_parser(
        "abort",
        parents=[bootstrap],
        help="abort a hanging transaction (requires administrative privileges)",
    )
    _add_partition(abort, required=True)
    abort.add_argument(
        "--start-offset", type=INT64, help="start offset of the transaction to abort"
    )
    abort.add_argument("--producer-id", type=PRODUCER_ID, help="producer id (with the two epochs)")
    abort.add_argument("--producer-epoch", type=EPOCH, help="producer epoch")
    abort.add_argument("--coordinator-epoch", type=INT32, help="coordinator epoch")


def _add_find_hanging(sub: Any, bootstrap: argparse.ArgumentParser) -> None:
    hanging = sub.add_parser("find-hanging", parents=[bootstrap], help="find hanging transactions")
    hanging.add_argument("--broker-id", type=INT32, help="broker id to search for hanging ones")
    hanging.add_argument(
        "--max-transaction-timeout", type=MINUTES, default=15, metavar="MINUTES",
        help="maximum transaction timeout in minutes to limit the scope of the search (15)",
    )  # fmt: skip
    _add_partition(hanging, required=False)
    hanging.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_partition(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--topic", required=required, help="topic name")
    parser.add_argument("--partition", type=PARTITION, required=required, help="partition number")


# -- running --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    try:
        if not args.bootstrap:
            raise UsageError("the following arguments are required: --bootstrap-server")
        parse_bootstrap(args.bootstrap)
        _check_usage(args)
    except (ClientConfigError, UsageError) as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_run(args))
    except (ClientError, OperationError) as exc:
        print(f"pier: error: {_describe_error(exc)}", file=sys.stderr)
        return EXIT_FAILED


def _check_usage(args: argparse.Namespace) -> None:
    command = args.transactions_command
    if command == "abort":
        _abort_usage(args)
    elif command == "find-hanging":
        if args.topic is None and args.broker_id is None:
            raise UsageError("find-hanging needs --topic or --broker-id to limit the search")
        if args.partition is not None and args.topic is None:
            raise UsageError("--partition needs --topic")


def _abort_usage(args: argparse.Namespace) -> None:
    by_producer = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is None and args.producer_id is None:
        raise UsageError(
            "identify the transaction to abort with --start-offset, or with --producer-id, "
            "--producer-epoch and --coordinator-epoch"
        )
    if args.start_offset is not None and any(v is not None for v in by_producer):
        raise UsageError("give either --start-offset or --producer-id and the epochs, not both")
    if args.start_offset is None:
        for name, value in (
            ("--producer-epoch", args.producer_epoch),
            ("--coordinator-epoch", args.coordinator_epoch),
        ):
            if value is None:
                raise UsageError(f"--producer-id needs {name}")


async def _run(args: argparse.Namespace) -> int:
    config = ClientConfig(
        client_id="pier-transactions",
        request_timeout_s=args.timeout,
        connect_timeout_s=min(args.timeout, 10.0),
        retries=5,
    )
    async with Cluster(args.bootstrap, config) as cluster:
        handlers: Mapping[str, Callable[[Cluster, argparse.Namespace], Any]] = {
            "list": _list,
            "describe": _describe,
            "describe-producers": _describe_producers,
            "abort": _abort,
            "find-hanging": _find_hanging,
        }
        await handlers[args.transactions_command](cluster, args)
    return EXIT_OK


# -- list -----------------------------------------------------------------------------------------
async def _list(cluster: Cluster, args: argparse.Namespace) -> None:
    listings = await list_transactions(
        cluster,
        states=args.state,
        producer_ids=args.producer_id,
        duration_ms=args.duration_ms,
        id_pattern=args.transactional_id_pattern,
    )
    _emit(LIST_HEADERS, [list_row(t) for t in listings], args.json)


def list_row(listing: TransactionListing) -> list[Any]:
    return [listing.transactional_id, listing.coordinator_id, listing.producer_id, listing.state]


# -- describe -------------------------------------------------------------------------------------
async def _describe(cluster: Cluster, args: argparse.Namespace) -> None:
    transactional_id = args.transactional_id
    try:
        found = await describe_transactions(cluster, [transactional_id])
    except BrokerResponseError as exc:
        raise OperationError(
            f"failed to describe transactional id '{transactional_id}': {_reason(exc)}"
        ) from None
    description = found[transactional_id]
    row = describe_row(description, _now_ms())
    if not args.json:
        print(kafka_table(DESCRIBE_HEADERS, [row]), end="")
        return
    document = dict(zip(JSON_KEYS[DESCRIBE_HEADERS], row, strict=True))
    document["partitions"] = [
        {"topic": tp.topic, "partition": tp.partition} for tp in description.partitions
    ]
    print(json.dumps(document, indent=2))


def describe_row(description: TransactionDescription, now_ms: int) -> list[Any]:
    """Kafka's columns; the duration is counted from the start time to `now_ms`."""
    start = description.start_time_ms
    return [
        description.coordinator_id,
        description.transactional_id,
        description.producer_id,
        description.producer_epoch,
        description.state,
        description.timeout_ms,
        start,
        None if start is None else now_ms - start,
        ",".join(str(tp) for tp in description.partitions),
    ]


# -- describe-producers ---------------------------------------------------------------------------
async def _describe_producers(cluster: Cluster, args: argparse.Namespace) -> None:
    tp = TopicPartition(args.topic, args.partition)
    where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
    try:
        states = (await describe_producers(cluster, [tp], broker_id=args.broker_id))[tp]
    except ClientError as exc:
        raise OperationError(
            f"failed to describe producers of {tp} on {where}: {_reason(exc)}"
        ) from None
    _emit(PRODUCER_HEADERS, [producer_row(s) for s in states], args.json)


def producer_row(state: ProducerState) -> list[Any]:
    return [
        state.producer_id,
        state.producer_epoch,
        -1 if state.coordinator_epoch is None else state.coordinator_epoch,
        state.last_sequence,
        state.last_timestamp_ms,
        state.current_txn_start_offset,
    ]


# -- abort ----------------------------------------------------------------------------------------
async def _abort(cluster: Cluster, args: argparse.Namespace) -> None:
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is not None:
        spec = await find_open_transaction(cluster, tp, args.start_offset)
        if spec is None:
            raise OperationError(
                f"no open transaction starts at offset {args.start_offset} on {tp}"
            )
    else:
        # A producer that never saw a marker shows coordinator epoch -1 in DescribeProducers;
        # 0 is at most any coordinator's epoch, as Kafka's tool reasons.
        spec = AbortSpec(tp, args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
    try:
        await abort_transaction(cluster, spec)
    except BrokerResponseError as exc:
        raise OperationError(f"failed to abort transaction {spec}: {_reason(exc)}") from None


# -- find-hanging ---------------------------------------------------------------------------------
async def _find_hanging(cluster: Cluster, args: argparse.Namespace) -> None:
    partitions = await _partitions_to_search(cluster, args)
    now_ms = _now_ms()
    found = await find_hanging(
        cluster,
        partitions,
        max_ms=args.max_transaction_timeout * 60_000,
        now_ms=now_ms,
        broker_id=args.broker_id,
    )
    _emit(HANGING_HEADERS, [hanging_row(tp, state, now_ms) for tp, state in found], args.json)


async def _partitions_to_search(cluster: Cluster, args: argparse.Namespace) -> list[TopicPartition]:
    if args.topic is not None and args.partition is not None:
        return [TopicPartition(args.topic, args.partition)]
    metadata = await cluster.metadata(refresh=True)
    if args.topic is not None:
        topics = [metadata.topic(args.topic)]
    else:
        topics = [t for _name, t in sorted(metadata.topics.items()) if not t.is_internal]
    return [
        TopicPartition(topic.name, number)
        for topic in topics
        for number, info in sorted(topic.partitions.items())
        if args.broker_id is None or args.broker_id in info.replicas
    ]


def hanging_row(tp: TopicPartition, state: ProducerState, now_ms: int) -> list[Any]:
    return [
        tp.topic,
        tp.partition,
        state.producer_id,
        state.producer_epoch,
        -1 if state.coordinator_epoch is None else state.coordinator_epoch,
        -1 if state.current_txn_start_offset is None else state.current_txn_start_offset,
        state.last_timestamp_ms,
        (now_ms - state.last_timestamp_ms) // 60_000,
    ]


# -- output and argument types --------------------------------------------------------------------
def _emit(headers: Sequence[str], rows: Sequence[Sequence[Any]], as_json: bool) -> None:
    if as_json:
        keys = JSON_KEYS[headers]
        print(json.dumps([dict(zip(keys, row, strict=True)) for row in rows], indent=2))
    else:
        print(kafka_table(headers, rows), end="")


def kafka_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Kafka's TransactionsCommand layout: each cell left-aligned to its column's width and
    followed by a tab; an absent value prints as None."""
    cells = [list(headers)] + [["None" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(headers))]
    return "".join(
        "".join(cell.ljust(width) + "\t" for cell, width in zip(line, widths, strict=True)) + "\n"
        for line in cells
    )


def _reason(exc: ClientError) -> str:
    if isinstance(exc, BrokerResponseError) and exc.code in _REASONS:
        return f"{_REASONS[exc.code]} ({exc.code.name.upper()})"
    return str(exc)


def _describe_error(exc: Exception) -> str:
    return _reason(exc) if isinstance(exc, ClientError) else str(exc)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _states(text: str) -> list[str]:
    """Comma-separated state names, case-insensitive, returned in Kafka's spelling."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s.lower() not in _BY_NAME]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown transaction state {', '.join(unknown) or repr(text)}: "
            f"expected one of {', '.join(STATES)}"
        )
    return [_BY_NAME[s.lower()] for s in names]


def _producer_ids(text: str) -> list[int]:
    try:
        ids = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"producer ids must be numbers: {text!r}") from None
    if not ids or any(not 0 <= i < 2**63 for i in ids):
        raise argparse.ArgumentTypeError(f"producer ids are 0 to 2^63-1: {text!r}")
    return ids
