"""`pier billing run|stream|invoice|usage`: the billing commands of the `pier` CLI.

Owns: argument parsing and the one-line errors of the billing job. `run` rolls `__usage` up into
hourly rollups (a Spark job on `--master`, default local[2]); `stream` does it continuously, one
micro-batch per `--trigger` interval (`billing.rollup.stream`); `invoice` computes one period's
invoices; `usage` prints a tenant's hourly rollups. `--db` defaults to `$PIER_DB`, `--bootstrap` to
`$PIER_BOOTSTRAP`. Errors are one line `pier: error: ...` on stderr: exit 2 for bad arguments, 1 for
a failed run (another run committed first, brokers unreachable, a database without the billing
tables); never a traceback. The database URL is never printed (it may hold a password).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_DURATION = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class _Failure(Exception):
    def __init__(self, message: str, status: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.status = status


def add_parser(commands: Any) -> None:
    billing = commands.add_parser("billing", help="usage rollups and invoices")
    sub = billing.add_subparsers(dest="billing_command", required=True)
    run = sub.add_parser("run", help="roll __usage up into hourly rollups (a Spark job)")
    _rollup_arguments(run)
    run.add_argument("--until", default=None, help="ISO time or epoch ms: read records before it")
    run.add_argument(
        "--sample-interval", default="60s", help="storage sampling interval (a sample holds ≤ 2×)"
    )
    run.add_argument(
        "--every",
        default=None,
        help="repeat every DURATION (e.g. 60s) on one Spark session until SIGTERM; a failed run"
        " is reported and the next one tries again",
    )
    stream = sub.add_parser(
        "stream", help="roll __usage up continuously (a Structured Streaming query) until SIGTERM"
    )
    _rollup_arguments(stream)
    stream.add_argument(
        "--sample-interval", default="60s", help="storage sampling interval (a sample holds ≤ 2×)"
    )
    stream.add_argument(
        "--trigger",
        default="10s",
        help="micro-batch interval (a DURATION such as 10s or 1m; a batch that takes longer is"
        " followed at once by the next)",
    )
    invoice = sub.add_parser("invoice", help="compute the invoices of a month")
    _db(invoice)
    invoice.add_argument("--period", required=True, help="YYYY-MM (UTC)")
    invoice.add_argument("--tenant", default=None, help="one tenant (default: all)")
    invoice.add_argument("--grace", default="72h", help="drafts until period end + grace")
    usage = sub.add_parser("usage", help="print a tenant's hourly usage")
    _db(usage)
    usage.add_argument("--tenant", required=True, help="tenant id")
    usage.add_argument("--from", dest="start", required=True, help="ISO time (UTC if no zone)")
    usage.add_argument("--to", dest="end", required=True, help="ISO time, exclusive")
    form = usage.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="JSON lines (the default)")
    form.add_argument("--csv", action="store_true", help="CSV with a header row")
    usage.add_argument(
        "--chart", type=Path, default=None, metavar="FILE.png", help="also draw the hours to a PNG"
    )


def _rollup_arguments(parser: Any) -> None:
    """The options `run` and `stream` share."""
    _db(parser)
    parser.add_argument(
        "--master",
        default="local[2]",
        help="Spark master: local[N], spark://HOST:PORT, or `existing` (spark-submit's)",
    )
    parser.add_argument("--bootstrap", default=os.environ.get("PIER_BOOTSTRAP"), help="brokers")
    parser.add_argument("--topic", default="__usage", help="usage topic")
    parser.add_argument(
        "--state",
        type=Path,
        default=os.environ.get("PIER_BILLING_STATE"),
        help="directory keeping the ids of counted records (shared by a cluster's executors)"
        " and the stream's checkpoint; default: billing-state beside a SQLite --db",
    )


def _db(parser: Any) -> None:
    parser.add_argument("--db", default=os.environ.get("PIER_DB"), help="tenancy database URL")


def run(args: argparse.Namespace) -> int:
    try:
        if not args.db:
            raise _Failure("--db (or PIER_DB) is required", EXIT_USAGE)
        if args.billing_command == "run":
            return _run(args)
        if args.billing_command == "stream":
            return _stream(args)
        if args.billing_command == "invoice":
            return _invoice(args)
        return _usage(args)
    except _Failure as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return exc.status


def parse_time_ms(name: str, text: str) -> int:
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _Failure(
            f"{name}: {text!r} is not an ISO time or epoch milliseconds", EXIT_USAGE
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_duration(name: str, text: str) -> timedelta:
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise _Failure(f"{name}: {text!r} is not a duration like 72h, 30m, 3d", EXIT_USAGE)
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def _database(url: str) -> Any:
    from tenancy.database import Database, normalise_url
    from tenancy.errors import ValidationError

    try:
        parsed = normalise_url(url)
    except ValidationError as exc:
        raise _Failure(f"--db: {exc.message}", EXIT_USAGE) from None
    # Billing reads and writes an existing store: a SQLite URL naming no file is a mistyped
    # path, never a request for a new, empty store.
    if parsed.drivername == "sqlite" and not Path(parsed.database or "").is_file():
        raise _Failure(
            f"--db: no tenant store at {parsed.database}: infra/up's is .pier/tenancy.db; "
            "`pier tenancy init --db URL` creates one",
            EXIT_USAGE,
        )
    try:
        return Database(url)
    except ValidationError as exc:
        raise _Failure(f"--db: {exc.message}", EXIT_USAGE) from None


def _state_dir(given: Path | str | None, db_url: str) -> Path:
    """--state, or `billing-state` beside a SQLite store's file."""
    if given:
        return Path(given)
    if db_url.startswith("sqlite:///") and db_url != "sqlite:///:memory:":
        return Path(db_url.removeprefix("sqlite:///")).parent / "billing-state"
    raise _Failure(
        "--state (or PIER_BILLING_STATE) is required with this --db: the directory that keeps"
        " the ids of counted usage records",
        EXIT_USAGE,
    )


def _store_error(exc: Exception) -> _Failure:
    first = (str(exc).splitlines() or [""])[0]
    if "no such table" in first or "does not exist" in first:
        return _Failure(
            "the tenancy database has no billing tables: run `pier tenancy init --db URL` first"
        )
    return _Failure(f"tenancy database: {type(exc).__name__}: {first}")


def _run(args: argparse.Namespace) -> int:
    if not args.bootstrap:
        raise _Failure("--bootstrap (or PIER_BOOTSTRAP) is required", EXIT_USAGE)
    until = parse_time_ms("--until", args.until) if args.until else None
    interval = parse_duration("--sample-interval", args.sample_interval)
    from sqlalchemy.exc import SQLAlchemyError

    from billing.jars import MissingJarsError
    from billing.rollup.ids import StateError
    from billing.rollup.job import RunOptions, describe, run_rollup
    from billing.rollup.ledger import FencedError
    from billing.spark import spark_session
    from brokers.client.errors import ClientError

    state = _state_dir(args.state, args.db)
    db = _database(args.db)
    options = RunOptions(
        args.bootstrap,
        state,
        args.topic,
        until,
        sample_interval_ms=int(interval.total_seconds() * 1000),
    )
    if args.every is not None:
        every = parse_duration("--every", args.every).total_seconds()
        return _run_every(lambda: run_rollup(spark_session(args.master), db, options), every)
    try:
        spark = spark_session(args.master)
        report = run_rollup(spark, db, options)
    except (FencedError, MissingJarsError, StateError) as exc:
        raise _Failure(str(exc)) from None
    except ClientError as exc:
        raise _Failure(f"reading {args.topic}: {type(exc).__name__}: {exc}") from None
    except SQLAlchemyError as exc:
        raise _store_error(exc) from None
    except Exception as exc:  # Spark (Py4J) failures: one line, not a JVM stack trace
        raise _Failure(f"billing run failed: {type(exc).__name__}: {_first_line(exc)}") from None
    finally:
        db.dispose()
    print(json.dumps(describe(report), sort_keys=True))
    print(f"pier: {report.line()}", file=sys.stderr)
    return EXIT_OK


def _stream(args: argparse.Namespace) -> int:
    """`pier billing stream`: one JSON line per micro-batch on stdout until SIGTERM/SIGINT."""
    import signal
    import threading

    if not args.bootstrap:
        raise _Failure("--bootstrap (or PIER_BOOTSTRAP) is required", EXIT_USAGE)
    trigger = parse_duration("--trigger", args.trigger).total_seconds()
    interval = parse_duration("--sample-interval", args.sample_interval)
    from billing.jars import MissingJarsError
    from billing.rollup.ids import StateError
    from billing.rollup.job import RunOptions
    from billing.rollup.stream import describe_batch, run_stream
    from billing.spark import spark_session

    state = _state_dir(args.state, args.db)
    db = _database(args.db)
    options = RunOptions(
        args.bootstrap, state, args.topic, sample_interval_ms=int(interval.total_seconds() * 1000)
    )
    stop = threading.Event()

    def report(batch: Any) -> None:
        print(json.dumps(describe_batch(batch), sort_keys=True), flush=True)

    try:
        spark = spark_session(args.master)  # before our handlers: PySpark sets one for SIGINT
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda _signum, _frame: stop.set())
        run_stream(spark, db, options, max(trigger, 1.0), stop, report)
    except (MissingJarsError, StateError) as exc:
        raise _Failure(str(exc)) from None
    except Exception as exc:  # Spark (Py4J) and store failures: one line
        raise _Failure(f"billing stream failed: {type(exc).__name__}: {_first_line(exc)}") from None
    finally:
        db.dispose()
    return EXIT_OK


def _run_every(once: Any, every_s: float) -> int:
    """`infra/up`'s rollup: run, report, wait, until SIGTERM/SIGINT. The Spark session is made
    once (`spark_session` returns the active one), so each round costs no JVM start."""
    import signal
    import threading

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signum, _frame: stop.set())
    while not stop.is_set():
        try:
            report = once()
            print(json.dumps(describe_report(report), sort_keys=True), flush=True)
        except Exception as exc:  # the next round tries again; one line each
            print(f"pier: billing run failed: {type(exc).__name__}: {_first_line(exc)}", flush=True)
        stop.wait(every_s)
    return EXIT_OK


def describe_report(report: Any) -> dict[str, Any]:
    from billing.rollup.job import describe

    result: dict[str, Any] = describe(report)
    return result


def _first_line(exc: Exception) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")


def _invoice(args: argparse.Namespace) -> int:
    grace = parse_duration("--grace", args.grace)
    from sqlalchemy.exc import SQLAlchemyError

    from billing.invoice.issue import issue
    from billing.invoice.periods import PeriodError
    from tenancy.errors import TenancyError, ValidationError
    from tenancy.store import TenantStore

    try:
        store = TenantStore.open(args.db)
    except ValidationError as exc:
        raise _Failure(f"--db: {exc.message}", EXIT_USAGE) from None
    try:
        outcomes = issue(store, args.period, tenant=args.tenant, grace=grace)
    except PeriodError as exc:
        raise _Failure(f"--period: {exc}", EXIT_USAGE) from None
    except TenancyError as exc:
        raise _Failure(str(exc)) from None
    except SQLAlchemyError as exc:
        raise _store_error(exc) from None
    finally:
        store.close()
    for outcome in outcomes:
        print(json.dumps(outcome.__dict__, sort_keys=True))
    failed = [o for o in outcomes if o.error]
    for outcome in failed:
        print(f"pier: error: {outcome.invoice_id}: {outcome.error}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _usage(args: argparse.Namespace) -> int:
    import csv

    from sqlalchemy.exc import SQLAlchemyError

    from tenancy.billing_store import USAGE_COLUMNS, UsageFilter, public, usage_rows

    wanted = UsageFilter(
        args.tenant, parse_time_ms("--from", args.start), parse_time_ms("--to", args.end)
    )
    db = _database(args.db)
    try:
        with db.read() as session:
            rows = [public(row) for row in usage_rows(session, wanted)]
    except SQLAlchemyError as exc:
        raise _store_error(exc) from None
    finally:
        db.dispose()
    if args.chart is not None:
        _chart(rows, args.tenant, args.chart)
    if args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=USAGE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            print(json.dumps(row))
    return EXIT_OK


def _chart(rows: list[dict[str, Any]], tenant: str, path: Path) -> None:
    from pier.usage_chart import draw

    try:
        draw(rows, tenant, path)
    except ImportError:
        raise _Failure(
            "--chart needs matplotlib: pip install 'pier[billing]'", EXIT_USAGE
        ) from None
    except OSError as exc:
        raise _Failure(f"cannot write {path}: {exc.strerror}", EXIT_USAGE) from None
