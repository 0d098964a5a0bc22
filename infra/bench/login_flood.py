"""Login flood benchmark (issue 21, attacks 5 and 6): wrong secrets at full speed against one key
id, while another tenant logs in and the attacked key is revoked.

Usage: `python -m infra.bench.login_flood [--quick] [--connections N] [--attacker-addresses K]
[--out DIR]` from the repository root. Starts one broker, a SQLite tenant
store and `pier gateway` with default settings (its metrics on a loopback port) in a temporary
directory, with tenants `target` (the attacked key K and its owner) and `victim` (fresh keys for
cold logins, one key for warm ones). Then:
1. baseline: the victim's logins with no attack: PLAIN cold (a fresh key: one scrypt), PLAIN warm
   (the same key again: the verification cache), SCRAM-SHA-256 cold (the client's PBKDF2 done
   beforehand); each login is a new connection (ApiVersions, SaslHandshake, SaslAuthenticate);
2. the flood: a child process keeps N connections (64; 32 `--quick`) busy sending wrong PLAIN
   secrets for K from 127.0.0.1 (or K loopback addresses, 127.0.0.1 upwards), each connection
   connect → ApiVersions → SaslHandshake → SaslAuthenticate written without waiting for the
   (delayed) answer → close, so the gateway's failure delay does not slow it;
3. meanwhile the victim's logins again, from 127.0.0.200 (another address, as another tenant's
   client would be), p50/p99 per kind;
4. then, the flood still running, K's owner, logged in (SCRAM, so that the gateway holds no verified
   PLAIN secret of K and every guess meets the backoff) before the flood from 127.0.0.201, has K
   revoked through the tenant store (as the admin API does); the time from the revoke's return to
   the gateway closing that connection is the revocation latency.
Output: one JSON document (stdout and `<out>/login_flood.json`): the attacker's attempts and
attempts/s, the gateway's own counters (failures, throttled attempts, scrypt checks by outcome),
the gateway's CPU share during the flood (1.0: a whole core), the victim's p50/p99 per kind
before and during the flood, and the revocation latency, each beside
its target (victim p50 < 50 ms, revocation < 1 s). Loopback addresses other than 127.0.0.1 need
Linux. Every process started is stopped on exit. Runs on the main thread plus the child process.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import secrets
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.bench.gateway_logins import SCRAM, LoginRefused, SaslConnection, ScramKey
from infra.bench.latency import percentile
from infra.bench.report import write_json
from infra.gateway import GatewayProcess, start_gateway
from infra.probes import free_port
from infra.stack import start_broker
from tenancy.domain import DEFAULT_ENTITY, QuotaEntity
from tenancy.quota_chain import QUOTA_NAMES
from tenancy.store import TenantStore

RESULTS = Path(__file__).resolve().parent / "results"
OPERATOR = "op-bench"
VICTIM_HOST, OWNER_HOST = "127.0.0.200", "127.0.0.201"
FULL = {"connections": 64, "cold": 30, "warm": 200}
QUICK = {"connections": 32, "cold": 15, "warm": 60}
RAMP_S = 1.0  # the flood runs this long before the victim is measured
MAX_FLOOD_S = 600.0
P50_TARGET_MS, REVOCATION_TARGET_MS = 50.0, 1000.0
COUNTERS = (
    "pier_gateway_authentication_failures_total",
    "pier_gateway_authentication_throttled_total",
    "pier_gateway_secret_checks_total",
    "pier_gateway_authentication_cache_hits_total",
)


@dataclass(frozen=True)
class Key:
    key_id: str
    secret: str


@dataclass(frozen=True)
class Cast:
    attacked: ScramKey  # K: guessed at (PLAIN), its owner's connection (SCRAM) revoked
    victim_cold: list[Key]  # one PLAIN login each, before and during the flood (halves)
    victim_warm: Key
    victim_scram: list[ScramKey]


# -- the tenant store --------------------------------------------------------------------------
def prepare_store(db_url: str, cold: int) -> Cast:
    with TenantStore.open(db_url) as store:
        store.upgrade()
        target = _account(store, "target")
        victim = _account(store, "victim")
        target_key = _key(store, "target", target)
        attacked = ScramKey(target_key.key_id, target_key.secret)
        plain = [_key(store, "victim", victim) for _ in range(2 * cold)]
        scram = [
            ScramKey(k.key_id, k.secret)
            for k in (_key(store, "victim", victim) for _ in range(2 * cold))
        ]
        for key in [*scram, attacked]:  # the client's PBKDF2, before anything is timed
            found = store.scram_credential(key.key_id, SCRAM)
            assert found is not None
            key.prime(found[1].salt, found[1].iterations)
        return Cast(attacked, plain, _key(store, "victim", victim), scram)


def _account(store: TenantStore, tenant_id: str) -> str:
    store.create_tenant(display_name=tenant_id, plan="free", tenant_id=tenant_id, actor=OPERATOR)
    no_quotas = dict.fromkeys(QUOTA_NAMES, None)
    store.set_quotas(tenant_id, QuotaEntity(DEFAULT_ENTITY, None), no_quotas, actor=OPERATOR)
    return store.create_service_account(tenant_id, name="bench", actor=OPERATOR).id


def _key(store: TenantStore, tenant_id: str, account_id: str) -> Key:
    key, secret = store.create_api_key(tenant_id, service_account_id=account_id, actor=OPERATOR)
    return Key(key.key_id, str(secret))


# -- the attacker (a child process) ------------------------------------------------------------
def attacker(
    host: str, port: int, key_id: str, connections: int, addresses: int, stop: Any, out: Any
) -> None:
    """Entry point of the child process: floods until `stop` (an Event) is set (at most
    MAX_FLOOD_S); `out` (a shared array) gets [attempts, errors]."""
    out[0], out[1] = asyncio.run(_flood(host, port, key_id, connections, addresses, stop))


async def _flood(
    host: str, port: int, key_id: str, connections: int, addresses: int, stop: Any
) -> tuple[int, int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + MAX_FLOOD_S
    counts = [0, 0]

    async def guesser(index: int) -> None:
        local = f"127.0.0.{1 + index % addresses}"
        while loop.time() < deadline and not stop.is_set():
            try:
                connection = await SaslConnection.open(host, port, local)
                try:
                    await connection.api_versions()
                    await connection.handshake("PLAIN")
                    guess = secrets.token_urlsafe(48)
                    await connection.send_authenticate(f"\0{key_id}\0{guess}".encode())
                    counts[0] += 1
                finally:
                    await connection.close()
            except (OSError, LoginRefused, TimeoutError, asyncio.IncompleteReadError):
                counts[1] += 1
                await asyncio.sleep(0.01)

    await asyncio.gather(*(guesser(index) for index in range(connections)))
    return counts[0], counts[1]


# -- the victim and the owner ------------------------------------------------------------------
LOGIN_TIMEOUT_S = 10.0
KIND_MAX_S = 40.0


@dataclass
class Logins:
    """Each login's ms (a failed or timed-out one counts with the time it took) and failures."""

    durations: list[float]
    failed: int = 0


async def timed_logins(keys: Sequence[Any], login: Callable[[Any], Awaitable[None]]) -> Logins:
    """One login per key, in sequence, each bounded by LOGIN_TIMEOUT_S, all by KIND_MAX_S (a
    starved gateway would otherwise keep the run going for keys × timeout)."""
    result = Logins([])
    stop_at = time.perf_counter() + KIND_MAX_S
    for key in keys:
        if time.perf_counter() > stop_at:
            break
        began = time.perf_counter()
        try:
            async with asyncio.timeout(LOGIN_TIMEOUT_S):
                await login(key)
        except (OSError, LoginRefused, TimeoutError, asyncio.IncompleteReadError):
            result.failed += 1
        result.durations.append((time.perf_counter() - began) * 1000)
    return result


async def plain_logins(host: str, port: int, keys: Sequence[Key]) -> Logins:
    """One PLAIN login per key, a new connection each (closed after)."""

    async def login(key: Key) -> None:
        connection = await SaslConnection.open(host, port, VICTIM_HOST)
        try:
            await connection.login_plain(key.key_id, key.secret)
        finally:
            await connection.close()

    return await timed_logins(keys, login)


async def scram_logins(host: str, port: int, keys: Sequence[ScramKey]) -> Logins:
    async def login(key: ScramKey) -> None:
        connection = await SaslConnection.open(host, port, VICTIM_HOST)
        try:
            await connection.login_scram(key)
        finally:
            await connection.close()

    return await timed_logins(keys, login)


def summary(logins: Logins) -> dict[str, Any]:
    ordered = sorted(logins.durations)
    return {
        "logins": len(ordered),
        "failed": logins.failed,
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(percentile(ordered, 0.99), 2),
        "max_ms": round(ordered[-1], 2),
    }


async def victim_round(gateway: GatewayProcess, cast: Cast, half: int, warm: int) -> dict[str, Any]:
    host, port = gateway.host, gateway.port
    cold = len(cast.victim_cold) // 2
    plain_cold = cast.victim_cold[half * cold : (half + 1) * cold]
    scram_cold = cast.victim_scram[half * cold : (half + 1) * cold]
    await plain_logins(host, port, [cast.victim_warm])  # cached from here on
    return {
        "plain_cold": summary(await plain_logins(host, port, plain_cold)),
        "plain_warm": summary(await plain_logins(host, port, [cast.victim_warm] * warm)),
        "scram_cold": summary(await scram_logins(host, port, scram_cold)),
    }


async def revocation_ms(owner: SaslConnection, db_url: str, key_id: str) -> float:
    """Revoke through the store (as the admin API does); ms from its return to the close."""

    def revoke() -> None:
        with TenantStore.open(db_url) as store:
            store.revoke_api_key(key_id, actor=OPERATOR)

    await asyncio.to_thread(revoke)
    answered = time.perf_counter()
    async with asyncio.timeout(30):
        while await owner.reader.read(65536):
            pass
    return (time.perf_counter() - answered) * 1000


def cpu_s(pid: int) -> float:
    """The process's CPU time so far (user + system), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gateway_counters(metrics_port: int) -> dict[str, float]:
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(COUNTERS):
            name, value = line.rsplit(" ", 1)
            found[name] = found.get(name, 0.0) + float(value)
    return found


# -- the run -----------------------------------------------------------------------------------
def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    plan = QUICK if args.quick else FULL
    connections = args.connections or int(plan["connections"])
    db_url = f"sqlite:///{root / 'tenancy.db'}"
    cast = prepare_store(db_url, int(plan["cold"]))
    broker = start_broker(root / "broker")
    gateway = None
    try:
        metrics_port = free_port()
        gateway = start_gateway(
            root / "gateway",
            broker.bootstrap,
            db_url,
            node_ids=[broker.node_id],
            metrics_port=metrics_port,
        )
        return asyncio.run(_measure(gateway, cast, db_url, plan, connections, args, metrics_port))
    finally:
        if gateway is not None:
            gateway.stop()
        broker.stop()


async def _measure(
    gateway: GatewayProcess,
    cast: Cast,
    db_url: str,
    plan: dict[str, int],
    connections: int,
    args: argparse.Namespace,
    metrics_port: int,
) -> dict[str, Any]:
    warm = int(plan["warm"])
    baseline = await victim_round(gateway, cast, 0, warm)
    print(f"baseline: {baseline}", file=sys.stderr)
    owner = await SaslConnection.open(gateway.host, gateway.port, OWNER_HOST)
    await owner.login_scram(cast.attacked)  # SCRAM: K's PLAIN secret stays unverified (cold)
    before = gateway_counters(metrics_port)
    cpu_before = cpu_s(gateway.pid)
    context = multiprocessing.get_context("spawn")
    counts, stop = context.Array("q", 2), context.Event()
    child = context.Process(
        target=attacker,
        args=(
            gateway.host,
            gateway.port,
            cast.attacked.key_id,
            connections,
            args.attacker_addresses,
            stop,
            counts,
        ),
    )
    started = time.perf_counter()
    child.start()
    try:
        await asyncio.sleep(RAMP_S)
        during = await victim_round(gateway, cast, 1, warm)
        print(f"under attack: {during}", file=sys.stderr)
        revoked_ms = await revocation_ms(owner, db_url, cast.attacked.key_id)
        print(f"revocation: {revoked_ms:.1f} ms", file=sys.stderr)
    finally:
        stop.set()
        await asyncio.to_thread(child.join, 60)
        if child.is_alive():
            child.terminate()
    elapsed = time.perf_counter() - started
    gateway_cpu = cpu_s(gateway.pid) - cpu_before
    after = gateway_counters(metrics_port)
    attempts, errors = int(counts[0]), int(counts[1])
    return {
        "bench": "login_flood",
        "attack": {
            "connections": connections,
            "source_addresses": args.attacker_addresses,
            "seconds": round(elapsed, 2),
            "attempts": attempts,
            "attempts_per_s": round(attempts / max(elapsed, 1e-9), 1),
            "connection_errors": errors,
            "gateway_cpu_share": round(gateway_cpu / max(elapsed, 1e-9), 2),
            "gateway_counters": {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after},
        },
        "victim": {"baseline": baseline, "under_attack": during},
        "revocation": {"close_after_revoke_ms": round(revoked_ms, 1)},
        "targets": {
            "victim_warm_p50_ms": {
                "value": during["plain_warm"]["p50_ms"],
                "target": f"< {P50_TARGET_MS:g}",
            },
            "victim_scram_cold_p50_ms": {
                "value": during["scram_cold"]["p50_ms"],
                "target": f"< {P50_TARGET_MS:g}",
            },
            "revocation_ms": {
                "value": round(revoked_ms, 1),
                "target": f"< {REVOCATION_TARGET_MS:g}",
            },
        },
    }


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a shorter, smaller flood")
    parser.add_argument("--connections", type=int, default=0, help="attacker connections")
    parser.add_argument(
        "--attacker-addresses", type=int, default=1, help="loopback addresses the flood uses"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="output directory")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="pier-login-flood-") as tmp:
        document = run(args, Path(tmp))
    print(write_json(document, args.out / "login_flood.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
