"""Gateway memory and descriptors under hostile connections (issue 21, attacks #3 and #4).

Usage: `python -m infra.bench.gateway_memory [--quick] [--out DIR] [--hold-s S] [--set KEY=VALUE]`
from the repository root (see infra/bench/README.md). Starts one broker (`infra.stack.start_broker`),
a SQLite tenant store with tenant `hostile` (`max_request_bytes` 100 MiB, the most a tenant may
have) and `pier gateway` in front (`infra.gateway.start_gateway`, default settings unless `--set`
gives gateway properties), all in a temporary directory on loopback. Then, measuring the
gateway's VmRSS (`/proc/<pid>/status`) and open descriptors (`/proc/<pid>/fd`) every 100 ms:
1. at rest, after one authenticated connection came and went;
2. attack #3: 200 unauthenticated connections (50 with `--quick`), each sending the size prefix of
   a 512 KiB frame and all of its body but one byte, held for up to `--hold-s` (40 s; 15 s quick);
3. attack #4: 5 PLAIN-authenticated connections, each sending the size prefix of a 100 MiB frame
   and 60 MiB of its body (written as fast as the gateway reads), held the same way;
4. attack #4 within the budget: the same with frames a tenant may send under the default limits
   (24 MiB announced, 20 MiB sent), so the tenant's request-byte budget is what bounds them.
For each attack: the peak RSS growth over rest, the peak descriptors, how many attackers the
gateway had closed at the end and when the last one was closed (null: some still open).
Prints one JSON document and writes it to `<out>/gateway_memory.json`. Every process is stopped
on exit. Runs on the main thread's asyncio loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infra.bench.gateway_logins import SaslConnection
from infra.gateway import GatewayProcess, start_gateway
from infra.stack import start_broker
from tenancy.domain import DEFAULT_ENTITY, DEFAULT_LIMITS, QuotaEntity
from tenancy.quota_chain import QUOTA_NAMES
from tenancy.store import TenantStore

RESULTS = Path(__file__).parent / "results"
OPERATOR = "op-bench"
KiB, MiB = 1024, 1024 * 1024
PRE_AUTH_FRAME = 512 * KiB
BIG_FRAME, BIG_SENT = 100 * MiB, 60 * MiB
MID_FRAME, MID_SENT = 24 * MiB, 20 * MiB
_INT32 = struct.Struct(">i")
SAMPLE_S = 0.1


@dataclass(frozen=True)
class Sample:
    at_s: float
    rss_kib: int
    fds: int


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def sample(pid: int, began: float) -> Sample:
    return Sample(round(time.monotonic() - began, 2), rss_kib(pid), open_fds(pid))


def prepare_store(db_url: str) -> tuple[str, str]:
    """Tenant `hostile` with the largest request size a tenant may have; its key id and secret."""
    with TenantStore.open(db_url) as store:
        store.upgrade()
        store.create_tenant(
            display_name="hostile", plan="free", tenant_id="hostile", actor=OPERATOR
        )
        store.set_quotas(
            "hostile",
            QuotaEntity(DEFAULT_ENTITY, None),
            dict.fromkeys(QUOTA_NAMES, None),
            actor=OPERATOR,
        )
        limits = replace(DEFAULT_LIMITS, max_request_bytes=100 * MiB, max_connections=1000)
        store.update_tenant("hostile", limits=limits, actor=OPERATOR)
        account = store.create_service_account("hostile", name="bench", actor=OPERATOR)
        key, secret = store.create_api_key("hostile", service_account_id=account.id, actor=OPERATOR)
    return key.key_id, str(secret)


def peer_closed(sock: socket.socket) -> bool:
    """True when the gateway has closed this connection (EOF or reset)."""
    try:
        data = sock.recv(65536, socket.MSG_DONTWAIT | socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return data == b""


class Attack:
    """Attacker sockets, their sending tasks, and the gateway samples taken while they hold."""

    def __init__(self, gateway: GatewayProcess, rest: Sample) -> None:
        self.gateway = gateway
        self.rest = rest
        self.sockets: list[socket.socket] = []
        self.samples: list[Sample] = []
        self.closed_at: dict[int, float] = {}
        self.refused = 0  # connections that could not even be opened or written

    async def hold(self, hold_s: float) -> None:
        began = time.monotonic()
        while time.monotonic() - began < hold_s:
            self.samples.append(sample(self.gateway.pid, began))
            for index, sock in enumerate(self.sockets):
                if index not in self.closed_at and peer_closed(sock):
                    self.closed_at[index] = round(time.monotonic() - began, 2)
            if len(self.closed_at) == len(self.sockets) and len(self.samples) > 20:
                break
            await asyncio.sleep(SAMPLE_S)

    def report(self) -> dict[str, Any]:
        peak = max(self.samples, key=lambda s: s.rss_kib)
        open_at_end = len(self.sockets) - len(self.closed_at)
        return {
            "attackers": len(self.sockets) + self.refused,
            "refused_at_connect": self.refused,
            "peak_rss_growth_mib": round((peak.rss_kib - self.rest.rss_kib) / 1024, 1),
            "peak_fds": max(s.fds for s in self.samples),
            "fds_at_end": self.samples[-1].fds,
            "rss_growth_at_end_mib": round(
                (self.samples[-1].rss_kib - self.rest.rss_kib) / 1024, 1
            ),
            "closed_by_gateway": len(self.closed_at),
            "still_open_at_end": open_at_end,
            "all_closed_after_s": max(self.closed_at.values()) if open_at_end == 0 else None,
            "held_s": self.samples[-1].at_s,
        }

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


async def send_partial(sock: socket.socket, size: int, sent: int, deadline: float) -> None:
    """The size prefix of a `size`-byte frame and `sent` bytes of its body, as fast as the gateway
    takes them, until `deadline` (loop time) or the gateway closes."""
    loop = asyncio.get_running_loop()
    chunk = b"\x00" * (256 * KiB)
    try:
        await loop.sock_sendall(sock, _INT32.pack(size))
        left = sent
        while left > 0 and loop.time() < deadline:
            part = chunk[: min(left, len(chunk))]
            await asyncio.wait_for(loop.sock_sendall(sock, part), max(0.01, deadline - loop.time()))
            left -= len(part)
    except (OSError, TimeoutError):
        return


async def connect(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, port))
    return sock


async def attack_3(gateway: GatewayProcess, rest: Sample, count: int, hold_s: float) -> Attack:
    attack = Attack(gateway, rest)
    deadline = asyncio.get_running_loop().time() + hold_s
    senders = []
    for _ in range(count):
        try:
            sock = await connect(gateway.host, gateway.port)
        except OSError:
            attack.refused += 1
            continue
        attack.sockets.append(sock)
        senders.append(
            asyncio.create_task(send_partial(sock, PRE_AUTH_FRAME, PRE_AUTH_FRAME - 1, deadline))
        )
    await attack.hold(hold_s)
    await asyncio.gather(*senders)
    return attack


async def attack_4(
    gateway: GatewayProcess,
    rest: Sample,
    key: tuple[str, str],
    hold_s: float,
    frame: tuple[int, int] = (BIG_FRAME, BIG_SENT),
    count: int = 5,
) -> Attack:
    attack = Attack(gateway, rest)
    deadline = asyncio.get_running_loop().time() + hold_s
    senders = []
    for _ in range(count):
        try:
            login = await SaslConnection.open(gateway.host, gateway.port)
            await login.login_plain(*key)
        except (OSError, RuntimeError, asyncio.IncompleteReadError):
            attack.refused += 1
            continue
        raw = login.writer.get_extra_info("socket")
        sock = raw.dup()  # the connection now lives on in `sock`
        login.writer.transport.abort()
        sock.setblocking(False)
        attack.sockets.append(sock)
        senders.append(asyncio.create_task(send_partial(sock, *frame, deadline)))
    await attack.hold(hold_s)
    await asyncio.gather(*senders)
    return attack


async def at_rest(gateway: GatewayProcess, key: tuple[str, str]) -> Sample:
    login = await SaslConnection.open(gateway.host, gateway.port)
    await login.login_plain(*key)
    await login.close()
    await asyncio.sleep(2.0)
    return sample(gateway.pid, time.monotonic())


def run(args: argparse.Namespace) -> dict[str, Any]:
    properties = dict(item.split("=", 1) for item in args.set)
    with tempfile.TemporaryDirectory(prefix="pier-bench-memory-") as tmp:
        root = Path(tmp)
        db_url = f"sqlite:///{root / 'tenancy.db'}"
        key = prepare_store(db_url)
        broker = start_broker(root / "broker" / "data")
        try:
            gateway = start_gateway(
                root / "gateway",
                broker.bootstrap,
                db_url,
                node_ids=[broker.node_id],
                properties={"usage.topic.replication.factor": "1", **properties},
            )
            try:
                return asyncio.run(measure(gateway, key, args))
            finally:
                gateway.stop()
        finally:
            broker.stop()


async def measure(
    gateway: GatewayProcess, key: tuple[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    hold_s = args.hold_s if args.hold_s is not None else (15.0 if args.quick else 40.0)
    rest = await at_rest(gateway, key)
    print(f"rest: {rest}", file=sys.stderr)
    three = await attack_3(gateway, rest, 50 if args.quick else 200, hold_s)
    three.close()
    print(f"attack 3: {three.report()}", file=sys.stderr)
    await asyncio.sleep(3.0)
    rest_4 = sample(gateway.pid, time.monotonic())
    four = await attack_4(gateway, rest_4, key, hold_s)
    four.close()
    print(f"attack 4: {four.report()}", file=sys.stderr)
    await asyncio.sleep(3.0)
    rest_4b = sample(gateway.pid, time.monotonic())
    within = await attack_4(gateway, rest_4b, key, hold_s, (MID_FRAME, MID_SENT))
    within.close()
    print(f"attack 4 within the budget: {within.report()}", file=sys.stderr)
    return {
        "benchmark": "gateway_memory",
        "settings": dict(item.split("=", 1) for item in args.set),
        "rest": {"rss_mib": round(rest.rss_kib / 1024, 1), "fds": rest.fds},
        "attack_3_unauthenticated_partial_frames": {
            "frame_bytes": PRE_AUTH_FRAME,
            "sent_bytes_each": PRE_AUTH_FRAME - 1,
            **three.report(),
        },
        "attack_4_authenticated_partial_frames": {
            "frame_bytes": BIG_FRAME,
            "sent_bytes_each": BIG_SENT,
            "rest_rss_mib": round(rest_4.rss_kib / 1024, 1),
            **four.report(),
        },
        "attack_4_within_budget": {
            "frame_bytes": MID_FRAME,
            "sent_bytes_each": MID_SENT,
            "rest_rss_mib": round(rest_4b.rss_kib / 1024, 1),
            **within.report(),
        },
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="50 attackers, 15 s holds")
    parser.add_argument("--hold-s", type=float, default=None, help="how long attackers hold")
    parser.add_argument("--out", type=Path, default=RESULTS, help="output directory")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a gateway property"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    text = json.dumps(result, indent=2)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gateway_memory.json").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
