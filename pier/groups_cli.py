"""`pier groups`: consumer group administration over the Kafka protocol, via `brokers.client`.

Owns: the `groups` subcommand — `list`, `describe`, `reset-offsets`, `delete` — mirroring
kafka-consumer-groups.sh: resets are a dry run unless `--execute`, and are refused unless the
group is Empty or Dead. Output is a table, or JSON with `--json`. Errors are one line
`pier: error: ...` on stderr: exit 2 for usage errors (argparse), 1 for operation errors (unknown
group, group not empty, broker unreachable); never a traceback. Choices: a `--to-datetime`
without a UTC offset is read as UTC (Kafka reads it in local time; UTC keeps runs reproducible);
`--state` takes a comma-separated list, matched case-insensitively.
Runs its own event loop per invocation; not thread-safe.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
from collections.abc import Sequence
from typing import Any

from brokers.client import Admin, ClientConfig, ClientError, TopicPartition
from brokers.client.cluster import parse_bootstrap
from brokers.client.errors import BrokerResponseError, ClientConfigError
from brokers.client.groups import GroupDescription
from brokers.client.offset_reset import (
    PartitionReset,
    ResetKind,
    ResetSpec,
    execute_reset,
    prepare_reset,
)
from brokers.client.offsets import LATEST
from brokers.wire.errors import ErrorCode

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
INACTIVE_STATES = ("Empty", "Dead")
TopicSpec = tuple[str, tuple[int, ...] | None]


class OperationError(Exception):
    """An operation that cannot be done (exit status 1)."""


def add_parser(commands: Any) -> None:
    """Register `groups` on the `pier` subcommand set."""
    bootstrap = argparse.ArgumentParser(add_help=False)
    bootstrap.add_argument("--bootstrap", default=argparse.SUPPRESS, help="HOST:PORT[,HOST:PORT]")
    groups = commands.add_parser("groups", help="consumer group administration")
    groups.add_argument("--bootstrap", default=None, help="HOST:PORT[,HOST:PORT] of a broker")
    groups.add_argument("--timeout", type=positive_float, default=30.0, help="seconds")
    sub = groups.add_subparsers(dest="groups_command", required=True)
    listing = sub.add_parser("list", parents=[bootstrap], help="list groups")
    listing.add_argument("--state", type=_states, default=(), help="e.g. Stable,Empty")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    describe = sub.add_parser("describe", parents=[bootstrap], help="members, offsets and lag")
    describe.add_argument("group", help="group id")
    describe.add_argument("--json", action="store_true", help="print JSON instead of a table")
    reset = sub.add_parser("reset-offsets", parents=[bootstrap], help="reset committed offsets")
    reset.add_argument("group", help="group id (it must have no active members)")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--topic", type=_topic, action="append", help="TOPIC[:P,P...]")
    where.add_argument("--all-topics", action="store_true", help="every committed topic")
    how = reset.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="each partition's first offset")
    how.add_argument("--to-latest", action="store_true", help="each partition's end offset")
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N, clamped into each log")
    how.add_argument(
        "--to-datetime",
        type=_timestamp_ms,
        metavar="ISO8601",
        help="the first offset at or after this time",
    )
    how.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset + N (N may be negative)"
    )
    reset.add_argument("--execute", action="store_true", help="commit (default: dry run)")
    reset.add_argument("--json", action="store_true", help="print JSON instead of a table")
    delete = sub.add_parser("delete", parents=[bootstrap], help="delete empty groups")
    delete.add_argument("groups", nargs="+", metavar="GROUP", help="group ids")


def run(args: argparse.Namespace) -> int:
    try:
        if not args.bootstrap:
            raise ClientConfigError("the following arguments are required: --bootstrap")
        parse_bootstrap(args.bootstrap)
    except ClientConfigError as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_run(args))
    except (ClientError, OperationError) as exc:
        print(f"pier: error: {_describe_error(exc)}", file=sys.stderr)
        return EXIT_FAILED


async def _run(args: argparse.Namespace) -> int:
    config = ClientConfig(
        client_id="pier-groups",
        request_timeout_s=args.timeout,
        connect_timeout_s=min(args.timeout, 10.0),
        retries=3,
    )
    async with Admin.for_bootstrap(args.bootstrap, config) as admin:
        command = args.groups_command
        if command == "list":
            return await _list(admin, args)
        if command == "describe":
            return await _describe(admin, args)
        if command == "reset-offsets":
            return await _reset(admin, args)
        return await _delete(admin, args.groups)


# -- list -----------------------------------------------------------------------------------------
async def _list(admin: Admin, args: argparse.Namespace) -> int:
    listings = await admin.list_groups(args.state)
    rows = [
        {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type} for g in listings
    ]
    _emit(rows, ("GROUP", "STATE", "PROTOCOL-TYPE"), args.json)
    return EXIT_OK


# -- describe -------------------------------------------------------------------------------------
async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    group = (await admin.describe_groups([args.group]))[args.group]
    committed = {tp: c.offset for tp, c in (await admin.fetch_offsets(args.group)).items()}
    if group.state == "Dead" and not group.members and not committed:
        raise OperationError(f"group '{args.group}' does not exist")
    owners = {tp: m.member_id for m in group.members for tp in (m.assignment or ())}
    partitions = sorted(set(committed) | set(owners))
    ends = await _log_end_offsets(admin, partitions)
    offsets = [
        _offset_row(tp, committed.get(tp), ends.get(tp), owners.get(tp)) for tp in partitions
    ]
    document = {**_group_summary(group), "offsets": offsets}
    if args.json:
        print(json.dumps(document, indent=2))
        return EXIT_OK
    print(
        f"GROUP {group.group_id}  STATE {group.state}  PROTOCOL {group.protocol_type}/{group.protocol}"
    )
    print()
    members = [{**m, "assignment": _partition_list(m["assignment"])} for m in document["members"]]
    _print_table(members, ("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"))
    print()
    _print_table(
        offsets, ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID")
    )
    return EXIT_OK


def _group_summary(group: GroupDescription) -> dict[str, Any]:
    members = [
        {
            "member_id": m.member_id,
            "instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "assignment": None
            if m.assignment is None
            else [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
        }
        for m in group.members
    ]
    return {
        "group": group.group_id,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol,
        "members": members,
    }


async def _log_end_offsets(
    admin: Admin, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    """Log end offsets (what consumers can read up to) of partitions whose topic still exists."""
    topics = (await admin.cluster.metadata(refresh=True)).topics
    live = [
        tp
        for tp in partitions
        if tp.topic in topics and tp.partition in topics[tp.topic].partitions
    ]
    if not live:
        return {}
    listed = await admin.list_offsets(dict.fromkeys(live, LATEST))
    return {tp: entry.offset for tp, entry in listed.items()}


def _offset_row(
    tp: TopicPartition, committed: int | None, end: int | None, owner: str | None
) -> dict[str, Any]:
    lag = None if committed is None or end is None else max(end - committed, 0)
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "current_offset": committed,
        "log_end_offset": end,
        "lag": lag,
        "member_id": owner,
    }


def _partition_list(assignment: list[dict[str, Any]] | None) -> str:
    if assignment is None:
        return "?"
    return ",".join(f"{a['topic']}:{a['partition']}" for a in assignment)


# -- reset-offsets --------------------------------------------------------------------------------
async def _reset(admin: Admin, args: argparse.Namespace) -> int:
    group = (await admin.describe_groups([args.group]))[args.group]
    if group.state not in INACTIVE_STATES:
        raise OperationError(
            f"assignments can only be reset if the group '{args.group}' is inactive, "
            f"but the current state is {group.state}"
        )
    partitions = await _reset_partitions(admin, args)
    plan = await prepare_reset(admin.cluster, args.group, _reset_spec(args), partitions)
    if args.execute:
        await execute_reset(admin.cluster, args.group, plan)
    _emit(
        _plan_rows(args.group, plan),
        ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
        args.json,
    )
    if not args.execute:
        print("pier: dry run; nothing committed (add --execute to commit)", file=sys.stderr)
    return EXIT_OK


async def _reset_partitions(admin: Admin, args: argparse.Namespace) -> list[TopicPartition]:
    if args.all_topics:
        committed = sorted(await admin.fetch_offsets(args.group))
        if not committed:
            raise OperationError(f"group '{args.group}' has no committed offsets")
        return committed
    metadata = await admin.cluster.metadata(refresh=True)
    partitions: list[TopicPartition] = []
    for topic, wanted in args.topic:
        existing = metadata.partitions(topic)
        missing = sorted(set(wanted or ()) - set(existing))
        if missing:
            raise OperationError(f"topic '{topic}' has no partition {missing[0]}")
        partitions += [TopicPartition(topic, p) for p in (wanted or existing)]
    return sorted(set(partitions))


def _reset_spec(args: argparse.Namespace) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec(ResetKind.EARLIEST)
    if args.to_latest:
        return ResetSpec(ResetKind.LATEST)
    if args.to_offset is not None:
        return ResetSpec(ResetKind.OFFSET, args.to_offset)
    if args.to_datetime is not None:
        return ResetSpec(ResetKind.DATETIME, args.to_datetime)
    return ResetSpec(ResetKind.SHIFT, args.shift_by)


def _plan_rows(group: str, plan: Sequence[PartitionReset]) -> list[dict[str, Any]]:
    return [
        {
            "group": group,
            "topic": entry.tp.topic,
            "partition": entry.tp.partition,
            "current_offset": entry.current,
            "new_offset": entry.target,
        }
        for entry in plan
    ]


# -- delete ---------------------------------------------------------------------------------------
async def _delete(admin: Admin, group_ids: Sequence[str]) -> int:
    status = EXIT_OK
    for group_id, error in (await admin.delete_groups(group_ids)).items():
        if error is None:
            print(f"Deleted group '{group_id}'.")
        else:
            print(f"pier: error: {_describe_error(error, group_id)}", file=sys.stderr)
            status = EXIT_FAILED
    return status


# -- output and argument types --------------------------------------------------------------------
def _describe_error(exc: Exception, group_id: str | None = None) -> str:
    if isinstance(exc, BrokerResponseError) and group_id is not None:
        if exc.code == ErrorCode.group_id_not_found:
            return f"group '{group_id}' does not exist"
        if exc.code == ErrorCode.non_empty_group:
            return f"group '{group_id}' is not empty (it has active members)"
    return str(exc)


def _emit(rows: list[dict[str, Any]], headers: Sequence[str], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, indent=2))
    else:
        _print_table(rows, headers)


def _print_table(rows: list[dict[str, Any]], headers: Sequence[str]) -> None:
    cells = [list(headers)] + [["-" if v is None else str(v) for v in row.values()] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(headers))]
    for line in cells:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        )


def positive_float(text: str) -> float:
    """An argparse type: a number above zero (timeouts in seconds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _states(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _topic(text: str) -> TopicSpec:
    topic, colon, partitions = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"no topic name in {text!r}")
    if not colon:
        return topic, None
    try:
        numbers = tuple(int(p) for p in partitions.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"partitions must be numbers: {text!r}") from None
    if any(n < 0 for n in numbers):
        raise argparse.ArgumentTypeError(f"partitions must not be negative: {text!r}")
    return topic, numbers


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return round(moment.timestamp() * 1000)
