"""Benchmark of credential verification: PLAIN and SCRAM checks per second, cold and cached.

    .venv/bin/python infra/bench/credentials.py [--backend sqlite|postgresql|both] [--quick]

For each store (a SQLite file in a temp dir; a PostgreSQL started by `infra.postgres` and stopped
at the end), one tenant, one service account and 32 API keys are created, then on one thread:
- `plain_cold`: `verify_api_key` with the verification cache off: a database read and one scrypt
  (N=2^14, r=8, p=1) per call; the once-a-minute `last_used_at` write happens on first use only.
- `plain_cached`: the same calls with the cache on (TTL 60 s), after one warm-up call per key.
- `scram_cold`: the server's side of a SCRAM exchange, cache off: `scram_credential` (a database
  read) + `verify_client_proof` + `server_signature`. The client's PBKDF2 (8192 iterations) is
  computed beforehand: it is the client's cost, not the gateway's.
- `scram_cached`: the same with the cache on.
- `scrypt_only`, `scram_proof_only`: the hash / proof check alone, for scale.
Printed to stdout and written to `infra/bench/results/credentials.json`. Progress goes to stderr.
Blocking; run alone (the machine's other load shows in the numbers).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.postgres import start_postgres
from tenancy.credentials import hash_secret, verify_secret
from tenancy.domain import Secret
from tenancy.scram import client_proof, server_signature, verify_client_proof
from tenancy.store import TenantStore

RESULTS = Path(__file__).parent / "results" / "credentials.json"
KEYS = 32
MECHANISM = "SCRAM-SHA-256"


def rate(label: str, calls: int, call: Callable[[int], object]) -> dict[str, float]:
    """Run `call(i)` `calls` times; return calls/s and mean µs per call."""
    start = time.perf_counter()
    for index in range(calls):
        call(index)
    elapsed = time.perf_counter() - start
    print(f"  {label}: {calls / elapsed:,.0f}/s", file=sys.stderr)
    return {"per_second": round(calls / elapsed, 1), "mean_us": round(elapsed / calls * 1e6, 1)}


def setup(url: str) -> list[tuple[str, Secret]]:
    with TenantStore.open(url) as store:
        store.upgrade()
        tenant = store.create_tenant(display_name="Bench", plan="free", actor="bench")
        account = store.create_service_account(tenant.id, name="bench", actor="bench")
        keys = []
        for _ in range(KEYS):
            key, secret = store.create_api_key(
                tenant.id, service_account_id=account.id, actor="bench"
            )
            keys.append((key.key_id, secret))
        return keys


def scram_inputs(url: str, keys: list[tuple[str, Secret]]) -> list[tuple[str, bytes, bytes]]:
    """Per key: (key id, auth message, client proof), computed as a client would."""
    inputs = []
    with TenantStore.open(url) as store:
        for key_id, secret in keys:
            found = store.scram_credential(key_id, MECHANISM)
            assert found is not None
            credential = found[1]
            message = f"n={key_id},r={secrets.token_hex(12)},s=x,i=8192,c=biws".encode()
            proof = client_proof(MECHANISM, secret, credential.salt, credential.iterations, message)
            inputs.append((key_id, message, proof))
    return inputs


def measure(url: str, quick: bool) -> dict[str, Any]:
    keys = setup(url)
    scram = scram_inputs(url, keys)
    scale = 5 if quick else 1
    results: dict[str, Any] = {}
    for cached in (False, True):
        suffix = "cached" if cached else "cold"
        with TenantStore.open(url, verification_cache_ttl_s=60 if cached else 0) as store:
            for key_id, secret in keys:  # warm-up: pool, last_used_at, cache
                assert store.verify_api_key(key_id, secret) is not None
                store.scram_credential(key_id, MECHANISM)

            def plain(i: int, store: TenantStore = store) -> None:
                key_id, secret = keys[i % KEYS]
                assert store.verify_api_key(key_id, secret) is not None

            def scram_check(i: int, store: TenantStore = store) -> None:
                key_id, message, proof = scram[i % KEYS]
                found = store.scram_credential(key_id, MECHANISM)
                assert found is not None and verify_client_proof(found[1], message, proof)
                server_signature(found[1], message)

            plain_calls = (20_000 if cached else 100) // scale
            scram_calls = (20_000 if cached else 2_000) // scale
            results[f"plain_{suffix}"] = rate(f"plain {suffix}", plain_calls, plain)
            results[f"scram_{suffix}"] = rate(f"scram {suffix}", scram_calls, scram_check)
    return results


def primitives(quick: bool) -> dict[str, Any]:
    stored = hash_secret("x" * 64)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'p.db'}"
        keys = setup(url)
        key_id, message, proof = scram_inputs(url, keys[:1])[0]
        with TenantStore.open(url) as store:
            found = store.scram_credential(key_id, MECHANISM)
    assert found is not None
    credential = found[1]
    return {
        "scrypt_only": rate(
            "scrypt only", 50 if quick else 200, lambda _: verify_secret("x" * 64, stored)
        ),
        "scram_proof_only": rate(
            "scram proof only", 20_000, lambda _: verify_client_proof(credential, message, proof)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="5× fewer calls")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "parameters": {"scrypt": "N=2^14 r=8 p=1", "scram_iterations": 8192, "keys": KEYS},
        "primitives": primitives(args.quick),
    }
    if args.backend in ("sqlite", "both"):
        print("sqlite:", file=sys.stderr)
        with tempfile.TemporaryDirectory() as folder:
            report["sqlite"] = measure(f"sqlite:///{Path(folder) / 'bench.db'}", args.quick)
    if args.backend in ("postgresql", "both"):
        print("postgresql:", file=sys.stderr)
        server = start_postgres()
        try:
            report["postgresql"] = measure(server.create_database("bench"), args.quick)
        finally:
            server.stop()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
