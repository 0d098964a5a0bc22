"""What one tenant's ListGroups or ListTransactions costs a broker when the fleet holds many
tenants' groups and transactional ids: whole (every tenant's entries built and encoded, as
before the name scope) against scoped to the tenant's prefix (the request header's name scope,
`brokers.wire.headers.NAME_SCOPE_TAG`, which the gateway now sends).

Starts one Pier broker process, makes `--groups` groups (an offset commit each) and `--ids`
transactional ids (InitProducerId each), `--tenants` prefixes shared evenly, then sends
`--requests` listings of each kind and reads the broker's CPU seconds (utime + stime) around
them. Prints one JSON document: CPU milliseconds per listing, whole and scoped.

Usage: `.venv/bin/python -m infra.bench.fleet_listings [--groups 10000] [--ids 10000]`.
Blocking, main thread only.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.wire.entities import make, request_module
from brokers.wire.headers import scoped_header
from brokers.wire.messages import encode_entity, is_flexible_request
from infra.bench.config_notices import cpu_seconds
from infra.broker import start_broker
from infra.probes import recv_exactly

COMMIT, LIST_GROUPS, INIT_PID, LIST_TXNS = 8, 16, 22, 66
PIPELINE = 256
TOPIC = "events"


def _frame(request: Any, correlation_id: int, scope: str | None = None) -> bytes:
    api_key, version = int(request.__api_key__), int(request.__version__)
    header = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"bench"
    if is_flexible_request(api_key, version):
        header += b"\x00"
        if scope is not None:
            header = scoped_header(header, scope)
    payload = header + encode_entity(request)
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return recv_exactly(sock, size)


def _pipelined(sock: socket.socket, requests: list[Any], scope: str | None = None) -> None:
    for start in range(0, len(requests), PIPELINE):
        chunk = requests[start : start + PIPELINE]
        sock.sendall(b"".join(_frame(r, start + i, scope) for i, r in enumerate(chunk)))
        for _ in chunk:
            _read_frame(sock)


def _commit(group: str) -> Any:
    module = request_module(COMMIT, 8)
    partition = make(
        module, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
        committed_leader_epoch=-1, committed_metadata="",
    )  # fmt: skip
    topic = make(module, "OffsetCommitRequestTopic", name=TOPIC, partitions=(partition,))
    return make(
        module, "OffsetCommitRequest", group_id=group, generation_id_or_member_epoch=-1,
        member_id="", group_instance_id=None, topics=(topic,),
    )  # fmt: skip


def _init(transactional_id: str) -> Any:
    return make(
        request_module(INIT_PID, 4), "InitProducerIdRequest", transactional_id=transactional_id,
        transaction_timeout=timedelta(seconds=60), producer_id=-1, producer_epoch=-1,
    )  # fmt: skip


def _list_groups() -> Any:
    return make(request_module(LIST_GROUPS, 4), "ListGroupsRequest", states_filter=())


def _list_transactions() -> Any:
    return make(
        request_module(LIST_TXNS, 1), "ListTransactionsRequest", state_filters=(),
        producer_id_filters=(), duration_filter=-1,
    )  # fmt: skip


def _cpu_ms_per(pid: int, sock: socket.socket, requests: list[Any], scope: str | None) -> float:
    before = cpu_seconds(pid)
    _pipelined(sock, requests, scope)
    return round((cpu_seconds(pid) - before) * 1000 / len(requests), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--ids", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pier-listings-") as root:
        broker = start_broker(Path(root) / "data", config={})
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
            with socket.create_connection((broker.host, broker.port), timeout=120) as sock:
                _pipelined(sock, [_init("warm-up")])  # the transaction log's partitions
                names = [f"t{i % args.tenants:04d}_n{i}" for i in range(max(args.groups, args.ids))]
                _pipelined(sock, [_commit(n) for n in names[: args.groups]])
                _pipelined(sock, [_init(n) for n in names[: args.ids]])
                results = {
                    kind: {
                        "whole_cpu_ms": _cpu_ms_per(broker.pid, sock, [make_one()] * n, None),
                        "scoped_cpu_ms": _cpu_ms_per(broker.pid, sock, [make_one()] * n, "t0007_"),
                    }
                    for kind, make_one, n in (
                        ("list_groups", _list_groups, args.requests),
                        ("list_transactions", _list_transactions, args.requests),
                    )
                }
        finally:
            broker.stop()
    print(json.dumps({"benchmark": "fleet_listings", "settings": vars(args), **results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
