"""`pier cluster`: the state of a ZooKeeper-mode cluster as its brokers report it.

Owns: the `cluster` subcommand. One Metadata request (through `brokers.client`) to any bootstrap
broker gives the live brokers, the controller and every partition's leader, replicas and ISR;
from them it prints the brokers (marking the controller), the under-replicated partitions (ISR
smaller than the replica set) and the offline ones (no live leader) — as a table, or JSON with
`--json`. Exit 0 when the cluster answered, 1 when it did not (one line on stderr, never a
traceback). Leadership operations are subcommands sent to the controller (see
`pier.cluster_ops`): `elect-leaders`, `reassign`, `reassignments`. Runs its own event loop per
invocation; not thread-safe.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from brokers.client import Admin, ClientConfig, ClientError
from brokers.client.metadata import ClusterMetadata
from pier import cluster_ops

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parser(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="brokers, controller, partition health")
    cluster_ops.add_connection_options(cluster, at_top=True)
    cluster_ops.add_parsers(cluster)


def summarize(meta: ClusterMetadata) -> dict[str, Any]:
    under, offline = [], []
    for topic in sorted(meta.topics.values(), key=lambda t: t.name):
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
            row = {
                "topic": topic.name,
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            if p.leader < 0 or p.leader not in meta.brokers:
                offline.append(row)
            elif len(p.isr) < len(p.replicas):
                under.append(row)
    return {
        "cluster_id": meta.cluster_id,
        "controller": meta.controller_id,
        "brokers": [
            {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in sorted(meta.brokers.values(), key=lambda b: b.node_id)
        ],
        "under_replicated": under,
        "offline": offline,
    }


def render(summary: dict[str, Any]) -> str:
    lines = [f"cluster {summary['cluster_id']}  controller {summary['controller']}", "BROKERS"]
    for b in summary["brokers"]:
        mark = " (controller)" if b["id"] == summary["controller"] else ""
        lines.append(f"  {b['id']}  {b['host']}:{b['port']}  rack={b['rack'] or '-'}{mark}")
    for title, key in (("UNDER-REPLICATED", "under_replicated"), ("OFFLINE", "offline")):
        rows = summary[key]
        lines.append(f"{title} PARTITIONS: {len(rows)}")
        lines += [
            f"  {r['topic']}-{r['partition']}  leader={r['leader']}  replicas={r['replicas']}"
            f"  isr={r['isr']}"
            for r in rows
        ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if not args.bootstrap:
        print("pier: error: the following arguments are required: --bootstrap", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "cluster_command", None):
        status: int = cluster_ops.run(args)
        return status

    async def ask() -> ClusterMetadata:
        config = ClientConfig(request_timeout_s=args.timeout)
        async with Admin.for_bootstrap(args.bootstrap, config) as admin:
            return await admin.describe_cluster()

    try:
        meta = asyncio.run(ask())
    except (ClientError, OSError, ValueError) as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    summary = summarize(meta)
    print(json.dumps(summary, indent=1) if args.json else render(summary))
    return EXIT_OK
