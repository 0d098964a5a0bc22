"""`pier cluster elect-leaders | reassign | reassignments`: leadership operations at the controller.

Owns the three subcommands of `pier cluster` (through `brokers.client.Admin`, which finds the
controller from Metadata):
- `elect-leaders [--topic T [--partition P]] [--unclean]`: preferred (or unclean) election; no
  topic = every partition (only those that needed one are listed back), a topic alone = all its
  partitions.
- `reassign --topic T --partition P (--replicas 1,2,3 | --cancel)`: start or cancel a move
  (KIP-455); it completes in the background once the new replicas are in sync.
- `reassignments [--topic T]`: the moves in flight.
Output is a table, or JSON with `--json`. Exit 0 on success, 1 when the cluster did not answer or
a partition's operation failed (ELECTION_NOT_NEEDED is not a failure), 2 for bad input (one line
on stderr, never a traceback). Runs its own event loop per invocation; not thread-safe.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from brokers.client import Admin, ClientConfig, ClientError, TopicPartition
from brokers.client.leadership import PartitionReassignment
from brokers.wire.errors import ErrorCode

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
Outcomes = dict[TopicPartition, ClientError | None]


class UsageError(ValueError):
    """Bad command-line input (exit 2)."""


def add_connection_options(parser: argparse.ArgumentParser, *, at_top: bool = False) -> None:
    """`--bootstrap/--timeout/--json`, accepted before or after a subcommand: the subcommand's
    copies default to SUPPRESS so they never overwrite what was given before it."""
    suppress: Any = argparse.SUPPRESS
    parser.add_argument(
        "--bootstrap", default=None if at_top else suppress, help="HOST:PORT[,…] of a broker"
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0 if at_top else suppress, help="seconds"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=False if at_top else suppress,
        help="print JSON instead of a table",
    )


def add_parsers(cluster: argparse.ArgumentParser) -> None:
    actions = cluster.add_subparsers(dest="cluster_command", parser_class=type(cluster))
    elect = actions.add_parser(
        "elect-leaders",
        help="preferred or unclean leader election",
        epilog="example: pier cluster elect-leaders --bootstrap 127.0.0.1:9092 --topic orders",
    )
    elect.add_argument("--topic", default=None, help="only this topic (default: every partition)")
    elect.add_argument(
        "--partition", default=None, help="only this partition of --topic (default: all)"
    )
    elect.add_argument(
        "--unclean",
        action="store_true",
        help="elect a replica out of the ISR when none in it is alive (may lose records)",
    )
    reassign = actions.add_parser(
        "reassign",
        help="move a partition's replicas (KIP-455)",
        epilog="example: pier cluster reassign --bootstrap 127.0.0.1:9092 --topic orders"
        " --partition 0 --replicas 2,3,1",
    )
    reassign.add_argument("--topic", default=None, help="the partition's topic (required)")
    reassign.add_argument("--partition", default=None, help="the partition (required)")
    reassign.add_argument("--replicas", default=None, help="broker ids, e.g. 1,2,3")
    reassign.add_argument(
        "--cancel", action="store_true", help="cancel the move in flight (instead of --replicas)"
    )
    listing = actions.add_parser("reassignments", help="partition reassignments in flight")
    listing.add_argument("--topic", default=None, help="only this topic (default: all)")
    for parser in (elect, reassign, listing):
        add_connection_options(parser)


def _non_negative(text: str, what: str) -> int:
    if not text.strip().isdigit():
        raise UsageError(f"{what} must be a non-negative integer, got {text!r}")
    return int(text)


def parse_replicas(text: str) -> list[int]:
    """ "1,2,3" → [1, 2, 3]; UsageError when empty, not integers, or repeated."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise UsageError(f"--replicas must be a comma-separated list of broker ids, got {text!r}")
    replicas = [_non_negative(item, "a broker id") for item in items]
    if len(set(replicas)) != len(replicas):
        raise UsageError(f"--replicas names a broker twice: {text!r}")
    return replicas


def _timeout(args: argparse.Namespace) -> float:
    timeout = float(args.timeout)
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    return timeout


def run(args: argparse.Namespace) -> int:
    """Run one subcommand; the exit status."""
    commands: dict[str, Callable[[Admin, argparse.Namespace], Awaitable[tuple[Any, bool]]]] = {
        "elect-leaders": _elect,
        "reassign": _reassign,
        "reassignments": _list,
    }
    try:
        timeout = _timeout(args)
        _check_args(args)
    except UsageError as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    async def ask() -> tuple[Any, bool]:
        config = ClientConfig(request_timeout_s=timeout)
        async with Admin.for_bootstrap(args.bootstrap, config) as admin:
            return await commands[args.cluster_command](admin, args)

    try:
        report, ok = asyncio.run(ask())
    except (ClientError, OSError, ValueError) as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(json.dumps(report, indent=1) if args.json else render(args.cluster_command, report))
    return EXIT_OK if ok else EXIT_FAILED


def _check_args(args: argparse.Namespace) -> None:
    if getattr(args, "partition", None) is not None:
        _non_negative(args.partition, "--partition")
    if args.cluster_command == "elect-leaders" and args.partition is not None and not args.topic:
        raise UsageError("--partition needs --topic")
    if args.cluster_command == "reassign":
        if not args.topic or args.partition is None:
            raise UsageError("reassign needs --topic and --partition")
        if (args.replicas is None) == (not args.cancel):
            raise UsageError("reassign needs exactly one of --replicas and --cancel")
        if args.replicas is not None:
            parse_replicas(args.replicas)


async def _elect(admin: Admin, args: argparse.Namespace) -> tuple[Any, bool]:
    partitions: list[TopicPartition] | None = None
    if args.topic and args.partition is not None:
        partitions = [TopicPartition(args.topic, int(args.partition))]
    elif args.topic:
        meta = await admin.describe_cluster()
        partitions = [TopicPartition(args.topic, p) for p in meta.partitions(args.topic)]
    outcomes = await admin.elect_leaders(partitions, unclean=args.unclean, timeout_s=args.timeout)
    return _outcome_rows(outcomes), all(_acceptable(e) for e in outcomes.values())


def _acceptable(error: ClientError | None) -> bool:
    return error is None or getattr(error, "code", None) == ErrorCode.election_not_needed


async def _reassign(admin: Admin, args: argparse.Namespace) -> tuple[Any, bool]:
    tp = TopicPartition(args.topic, int(args.partition))
    target = None if args.cancel else parse_replicas(args.replicas)
    outcomes = await admin.alter_partition_reassignments({tp: target}, timeout_s=args.timeout)
    return _outcome_rows(outcomes), all(e is None for e in outcomes.values())


async def _list(admin: Admin, args: argparse.Namespace) -> tuple[Any, bool]:
    moving = await admin.list_partition_reassignments()
    rows = [
        _reassignment_row(tp, r)
        for tp, r in sorted(moving.items())
        if args.topic is None or tp.topic == args.topic
    ]
    return rows, True


def _outcome_rows(outcomes: Outcomes) -> list[dict[str, Any]]:
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "error": None
            if e is None
            else getattr(e, "code", ErrorCode.unknown_server_error).name.upper(),
            "message": None if e is None else str(e),
        }
        for tp, e in sorted(outcomes.items())
    ]


def _reassignment_row(tp: TopicPartition, r: PartitionReassignment) -> dict[str, Any]:
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "replicas": list(r.replicas),
        "adding": list(r.adding),
        "removing": list(r.removing),
    }


def render(command: str, rows: list[dict[str, Any]]) -> str:
    if command == "reassignments":
        lines = [f"REASSIGNMENTS IN PROGRESS: {len(rows)}"]
        lines += [
            f"  {r['topic']}-{r['partition']}  replicas={r['replicas']}  adding={r['adding']}"
            f"  removing={r['removing']}"
            for r in rows
        ]
        return "\n".join(lines)
    lines = [f"{r['topic']}-{r['partition']}  {r['error'] or 'OK'}" for r in rows]
    return "\n".join(lines) if lines else "no partition needed an election"
