"""`pier billing ...` as a process: output, exit statuses and one-line errors."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from infra.stack import BrokerProcess
from tests.integration.billing.helpers import rollups
from tests.integration.billing.usage_gen import traffic, traffic_totals, write

pytestmark = pytest.mark.integration


def pier(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_run_rolls_up_and_prints_its_offsets(usage_broker: BrokerProcess, sqlite_url: str) -> None:
    records = traffic(random.Random(21), ["acme", "globex"], 30)
    write(usage_broker.bootstrap, [*records, (b"k/1/1", b"[]")])
    done = pier("billing", "run", "--db", sqlite_url, "--bootstrap", usage_broker.bootstrap)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["records"] == 30 and report["rejected"] == {"value is not a JSON object": 1}
    assert sum(report["end_offsets"].values()) == 31
    assert "1 rejected (1× value is not a JSON object)" in done.stderr
    assert rollups(sqlite_url) == traffic_totals(records)


def test_errors_are_one_line(usage_broker: BrokerProcess, tmp_path: Path) -> None:
    bad = pier("billing", "run", "--db", "mysql://x", "--bootstrap", usage_broker.bootstrap)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--db" in bad.stderr
    absent = tmp_path / "absent.db"
    typo = pier("billing", "run", "--db", f"sqlite:///{absent}", "--bootstrap", "x:1")
    assert typo.returncode == 2 and typo.stderr.count("\n") == 1, typo.stderr
    assert f"no tenant store at {absent}" in typo.stderr and ".pier/tenancy.db" in typo.stderr
    assert not absent.exists()  # a mistyped path never becomes a new, empty store
    (tmp_path / "empty.db").touch()
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    missing = pier("billing", "run", "--db", empty, "--bootstrap", usage_broker.bootstrap)
    assert missing.returncode == 1, missing.stderr
    assert missing.stderr.splitlines()[-1].startswith("pier: error: the tenancy database has no")
    late = pier("billing", "run", "--db", empty, "--bootstrap", "x:1", "--until", "soon")
    assert late.returncode == 2 and "--until" in late.stderr


def test_invoice_and_usage_commands(usage_broker: BrokerProcess, sqlite_url: str) -> None:
    from decimal import Decimal

    from tenancy.domain import Plan, PlanDimension, PlanTier
    from tenancy.store import TenantStore

    with TenantStore.open(sqlite_url) as store:
        tiers = (PlanTier(None, Decimal("0.10")),)
        store.put_plan(
            Plan("p", "EUR", {"egress_gib": PlanDimension(Decimal(0), tiers)}), actor="t"
        )
        store.create_tenant(display_name="A", plan="p", tenant_id="acme", actor="t")
    records = traffic(random.Random(22), ["acme"], 20)
    write(usage_broker.bootstrap, records)
    assert (
        pier("billing", "run", "--db", sqlite_url, "--bootstrap", usage_broker.bootstrap).returncode
        == 0
    )
    done = pier("billing", "invoice", "--db", sqlite_url, "--period", "2026-01", "--tenant", "acme")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    egress = sum(r.bytes_out for r in records)
    expected = (Decimal(egress) / 2**30 * Decimal("0.10")).quantize(Decimal("0.01"))
    assert (outcome["status"], outcome["total"]) == ("final", str(expected))
    usage = pier(
        "billing", "usage", "--db", sqlite_url, "--tenant", "acme",
        "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02",
    )  # fmt: skip
    assert usage.returncode == 0, usage.stderr
    rows = [json.loads(line) for line in usage.stdout.splitlines()]
    assert sum(r["bytes_out"] for r in rows) == egress
    assert sum(r["records"] for r in rows) == 20 and rows[0]["hour"].endswith(":00:00Z")
    csv_out = pier(
        "billing", "usage", "--db", sqlite_url, "--tenant", "acme", "--csv",
        "--from", "2026-01-01", "--to", "2026-01-02",
    )  # fmt: skip
    chart = Path(sqlite_url.removeprefix("sqlite:///")).with_name("usage.png")
    drawn = pier(
        "billing", "usage", "--db", sqlite_url, "--tenant", "acme", "--chart", str(chart),
        "--from", "2026-01-01", "--to", "2026-01-02",
    )  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr
    assert chart.read_bytes().startswith(b"\x89PNG")
    header, *lines = csv_out.stdout.splitlines()
    assert header.startswith("hour,tenant,principal,client_id,topic,bytes_in") and len(
        lines
    ) == len(rows)
    bad = pier("billing", "invoice", "--db", sqlite_url, "--period", "2026-13")
    assert bad.returncode == 2 and bad.stderr.strip().endswith("is not YYYY-MM")
