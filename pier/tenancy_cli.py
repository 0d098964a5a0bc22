"""`pier tenancy init`, `pier admin-api` and `pier admin`: the tenancy commands of the `pier` CLI.

Owns: creating the tenant store's schema and the first operator (its token is printed once, alone
on stdout, so a script can capture it; nothing else ever shows it again), running the admin HTTP
API, and the `pier admin <resource> <verb>` argument parsers (the calls are in
`pier.admin_client`: tables, or the API's JSON with `--json`). The token comes from `--token` or
`PIER_ADMIN_TOKEN`. Errors are one line `pier: error: ...` on stderr: exit 2 for usage errors,
1 for failed operations (the API's problem title and detail); never a traceback. Choices: `init`
on a database that already has an operator upgrades the schema and creates no new token; list
commands show one page (`--limit`, `--cursor`) and name the next cursor on stderr.
One invocation, one thread (the admin-api server runs its own event loop).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Any

from pier.admin_client import (
    LIMIT_FLAGS,
    NO_CAP,
    QUOTA_NAMES,
    RATE_CAP_FLAGS,
    TOKEN_ENV,
    OperationError,
    UsageError,
    run_admin,
)

COMMANDS = ("tenancy", "admin-api", "admin")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# -- parsers ---------------------------------------------------------------------------------------
def add_parser(commands: Any) -> None:
    """Register `tenancy`, `admin-api` and `admin` on the `pier` subcommand set."""
    tenancy = commands.add_parser("tenancy", help="tenant store administration")
    tenancy_sub = tenancy.add_subparsers(dest="tenancy_command", required=True)
    init = tenancy_sub.add_parser("init", help="create the schema and print a first operator token")
    init.add_argument("--db", required=True, help="sqlite:///PATH or postgresql+psycopg://...")
    init.add_argument("--operator", default="admin", help="name of the first operator")
    api = commands.add_parser("admin-api", help="run the operators' admin HTTP API")
    api.add_argument("--db", required=True, help="tenant store URL")
    api.add_argument("--port", required=True, type=int, help="listener port (0 = any free)")
    api.add_argument("--host", default="127.0.0.1", help="listener address")
    api.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    admin = commands.add_parser("admin", help="call the admin API")
    admin.add_argument("--url", default=os.environ.get("PIER_ADMIN_URL"), help="admin API base URL")
    admin.add_argument("--token", default=None, help=f"operator token (default: ${TOKEN_ENV})")
    admin.add_argument("--json", action="store_true", help="print the API's JSON")
    admin.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    resources = admin.add_subparsers(dest="resource", required=True)
    for adder in (
        _tenant_parsers,
        _account_parsers,
        _key_parsers,
        _quota_parsers,
        _acl_parsers,
        _plan_parsers,
    ):
        adder(resources)


class _Verbs:
    """A resource's verb set; every verb also takes `--json`, `--url`, `--token` after it."""

    def __init__(self, action: Any) -> None:
        self._action = action

    def add_parser(self, name: str, **options: Any) -> argparse.ArgumentParser:
        parents = [_anywhere(), *options.pop("parents", [])]
        parser: argparse.ArgumentParser = self._action.add_parser(name, parents=parents, **options)
        return parser


def _anywhere() -> argparse.ArgumentParser:
    # SUPPRESS keeps the value given before the resource when the flag is absent after the verb.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    common.add_argument("--url", default=argparse.SUPPRESS)
    common.add_argument("--token", default=argparse.SUPPRESS)
    return common


def _verbs(resources: Any, name: str, help_text: str) -> _Verbs:
    parser = resources.add_parser(name, help=help_text)
    return _Verbs(parser.add_subparsers(dest="verb", required=True))


def _paged(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=None, help="page size (1-1000)")
    parser.add_argument("--cursor", default=None, help="next_cursor of the previous page")


def _rate_cap(text: str) -> int | str:
    if text.lower() in (NO_CAP, "null"):
        return NO_CAP
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1 (or none)")
    return value


def _with_limits(parser: argparse.ArgumentParser) -> None:
    for name in LIMIT_FLAGS:
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=None)
    for name in RATE_CAP_FLAGS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=_rate_cap,
            default=None,
            metavar="BYTES_PER_S",
            help="tenant-wide cap over all its principals (none: no cap)",
        )


def _tenant_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "tenants", "tenants")
    create = verbs.add_parser("create")
    create.add_argument("--display-name", required=True)
    create.add_argument("--plan", required=True)
    create.add_argument("--id", default=None, help="tenant id (generated when absent)")
    create.add_argument("--idempotency-key", default=None)
    _with_limits(create)
    listing = verbs.add_parser("list")
    listing.add_argument("--status", choices=["active", "suspended", "deleted"], default=None)
    _paged(listing)
    update = verbs.add_parser("update")
    update.add_argument("tenant")
    update.add_argument("--display-name", default=None)
    update.add_argument("--plan", default=None)
    _with_limits(update)
    for verb in ("get", "delete", "suspend", "resume"):
        verbs.add_parser(verb).add_argument("tenant")


def _account_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "service-accounts", "a tenant's service accounts")
    create = verbs.add_parser("create")
    create.add_argument("tenant")
    create.add_argument("--name", required=True)
    create.add_argument("--description", default=None)
    listing = verbs.add_parser("list")
    listing.add_argument("tenant")
    _paged(listing)


def _key_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "api-keys", "a tenant's API keys")
    create = verbs.add_parser("create")
    create.add_argument("tenant")
    create.add_argument("--service-account", required=True, help="service account id")
    create.add_argument("--description", default=None)
    create.add_argument("--expires-at", default=None, help="RFC 3339 timestamp")
    listing = verbs.add_parser("list")
    listing.add_argument("tenant")
    _paged(listing)
    verbs.add_parser("revoke").add_argument("key")


def _quota_value(text: str) -> tuple[str, float | None]:
    name, sep, value = text.partition("=")
    if not sep or name not in QUOTA_NAMES:
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE with NAME one of {', '.join(QUOTA_NAMES)}"
        )
    if value.lower() in ("none", "null", ""):
        return name, None
    try:
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None


def _quota_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "quotas", "a tenant's client quotas")
    entity = argparse.ArgumentParser(add_help=False)
    entity.add_argument("--user", default=None, help="service account id or <default>")
    entity.add_argument("--client-id", default=None, help="client id or <default>")
    put = verbs.add_parser("set", parents=[entity])
    put.add_argument("tenant")
    put.add_argument(
        "--quota",
        type=_quota_value,
        action="append",
        required=True,
        help="NAME=VALUE (VALUE none removes)",
    )
    verbs.add_parser("get").add_argument("tenant")
    verbs.add_parser("delete", parents=[entity]).add_argument("tenant")
    effective = verbs.add_parser("effective")
    effective.add_argument("tenant")
    effective.add_argument("--user", required=True)
    effective.add_argument("--client-id", required=True)


def _acl_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "acls", "a tenant's ACLs")
    create = verbs.add_parser("create")
    create.add_argument("tenant")
    for flag in (
        "resource-type",
        "pattern-type",
        "resource-name",
        "operation",
        "permission",
        "principal",
    ):
        create.add_argument("--" + flag, required=True)
    create.add_argument("--host", default=None)
    listing = verbs.add_parser("list")
    listing.add_argument("tenant")
    _paged(listing)
    delete = verbs.add_parser("delete", help="one ACL by id, or every ACL matching the filters")
    delete.add_argument("tenant")
    delete.add_argument("acl_id", nargs="?", default=None)
    for flag in (
        "resource-type",
        "pattern-type",
        "resource-name",
        "operation",
        "permission",
        "principal",
        "host",
    ):
        delete.add_argument("--" + flag, default=None)


def _plan_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "plans", "billing plans")
    verbs.add_parser("get").add_argument("name")
    put = verbs.add_parser("put")
    put.add_argument("name")
    put.add_argument("--file", required=True, help="JSON plan document ('-' for stdin)")


# -- dispatch --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    try:
        if args.command == "tenancy":
            return _init(args.db, args.operator)
        if args.command == "admin-api":
            return _serve(args)
        run_admin(args)
        return EXIT_OK
    except UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except OperationError as exc:
        return _fail(str(exc), EXIT_FAILED)


def _fail(message: str, status: int) -> int:
    print(f"pier: error: {message}", file=sys.stderr)
    return status


def _open_store(url: str) -> Any:
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from tenancy.errors import TenancyError, ValidationError
    from tenancy.store import TenantStore

    try:
        return TenantStore.open(url)
    except ArgumentError as exc:
        raise UsageError(f"--db: {exc}") from None
    except ValidationError as exc:  # the URL itself
        raise UsageError(f"--db: {exc.message}") from None
    except (SQLAlchemyError, TenancyError, OSError) as exc:
        raise _store_failure(exc) from None


def _store_failure(exc: Exception) -> OperationError:
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return OperationError(f"tenant store: {type(exc).__name__}: {first_line}")


def _init(url: str, operator: str) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from tenancy.errors import TenancyError

    store = _open_store(url)
    try:
        store.upgrade()
        if store.has_operators():
            print("pier: schema is up to date; operators exist, no new token", file=sys.stderr)
            return EXIT_OK
        token = store.create_operator(operator, actor="pier tenancy init")
    except (SQLAlchemyError, TenancyError, OSError) as exc:
        raise _store_failure(exc) from None
    finally:
        store.close()
    print(
        f"pier: operator {operator!r} created; its token follows and is not shown again",
        file=sys.stderr,
    )
    print(str(token), flush=True)
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from pier.logs import configure

    configure(args.log_level)
    store = _open_store(args.db)
    try:
        store.current_version()  # fail fast, with one line, on an unreachable or empty database
        return asyncio.run(_serve_forever(store, args.host, args.port))
    except SQLAlchemyError as exc:
        raise OperationError(
            f"tenant store not usable ({type(exc).__name__}); run `pier tenancy init --db URL` first?"
        ) from None
    except OSError as exc:
        raise OperationError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    finally:
        store.close()


async def _serve_forever(store: Any, host: str, port: int) -> int:
    from aiohttp import web

    from tenancy.api import create_app
    from tenancy.api.metrics import PathAccessLogger

    runner = web.AppRunner(create_app(store), access_log_class=PathAccessLogger)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0][1]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"pier admin-api ready url=http://{host}:{bound}", file=sys.stderr, flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()
    return EXIT_OK
