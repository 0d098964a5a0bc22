"""`pier tenancy init`, `pier admin-api` and `pier admin`: the tenancy commands of the `pier` CLI.

Owns: creating the tenant store's schema and the first operator (its token is printed once, alone
on stdout, so a script can capture it; nothing else ever shows it again), running the admin HTTP
API, and the `pier admin <resource> <verb>` argument parsers (the calls are in
`pier.admin_client`: tables, or the API's JSON with `--json`). The token comes from `--token` or
`PIER_ADMIN_TOKEN`. Errors are one line `pier: error: ...` on stderr: exit 2 for usage errors,
1 for failed operations (the API's problem title and detail); never a traceback. Choices: `init`
on a database that already has an operator upgrades the schema and creates no new token; list
commands show one page (`--limit`, `--cursor`) and name the next cursor on stderr. Quota values
are parsed in Kafka's units (byte rates whole bytes/s; a fraction is a usage error), and quota
entities are named as kafka-configs names them (`--user`, `--client`/`--client-id`, `--user-defaults`,
`--client-defaults`). One invocation, one thread (the admin-api server runs its own event loop).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Any

from pier.admin_client import (
    BYTE_RATE_QUOTAS,
    DEFAULT_ENTITY,
    LIMIT_FLAGS,
    NAME_LIMIT_FLAGS,
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
    api.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log lines at this level and above, to stderr (%(default)s)",
    )
    api.add_argument(
        "--gateway-http",
        action="append",
        default=[],
        metavar="URL",
        help="a gateway's tenant HTTP API base URL, for the operator view of HTTP consumers"
        " (repeat for each gateway)",
    )
    api.add_argument(
        "--zookeeper",
        default=None,
        metavar="HOST:PORT[/chroot]",
        help="the gateways' zookeeper.connect: GET /v1/gateways and `pier gateway status` then "
        "say whether each gateway is registered there (default: not read)",
    )
    admin = commands.add_parser(
        "admin",
        help="call the admin API",
        description="Call the operators' admin API. Plans: `pier admin plans list` "
        "(free, standard and enterprise exist from the start; docs/plans.md).",
    )
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
        _gateway_parsers,
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
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the API's JSON"
    )
    common.add_argument(
        "--url", default=argparse.SUPPRESS, help="admin API base URL (default: $PIER_ADMIN_URL)"
    )
    common.add_argument(
        "--token", default=argparse.SUPPRESS, help=f"operator token (default: ${TOKEN_ENV})"
    )
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


_LIMIT_HELP = {
    "max_partitions": "partitions over all the tenant's topics",
    "max_storage_bytes": "bytes stored over all its partitions",
    "max_connections": "open connections at once",
    "max_request_bytes": "largest request, in bytes (at most 104857600)",
}


_OPTIONAL_HELP = {  # flag: (metavar, help); `none` sends null
    "max_producer_byte_rate": (
        "BYTES_PER_S",
        "tenant-wide cap over all its principals (none: no cap)",
    ),
    "max_consumer_byte_rate": (
        "BYTES_PER_S",
        "tenant-wide cap over all its principals (none: no cap)",
    ),
    "max_groups": ("N", "consumer groups the tenant may hold (none: the gateway's setting)"),
    "max_transactional_ids": ("N", "transactional ids it may hold (none: the gateway's setting)"),
}


def _with_limits(parser: argparse.ArgumentParser, absent: str) -> None:
    for name in LIMIT_FLAGS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=int,
            default=None,
            metavar="N",
            help=f"{_LIMIT_HELP[name]} ({absent})",
        )
    for name in (*RATE_CAP_FLAGS, *NAME_LIMIT_FLAGS):
        metavar, help_text = _OPTIONAL_HELP[name]
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=_rate_cap,
            default=None,
            metavar=metavar,
            help=help_text,
        )


_TENANT_HELP = "tenant id"
_ACL_FLAGS = {
    "resource-type": "resource type: TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID",
    "pattern-type": "pattern type: literal or prefixed",
    "resource-name": "resource name (or prefix); * for every one",
    "operation": "operation: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,"
    " ALTER_CONFIGS, IDEMPOTENT_WRITE or ALL",
    "permission": "permission: allow or deny",
    "principal": "principal: User:<service account id>",
}
_PLAN_HELP = "free, standard, enterprise or any plan defined (`pier admin plans list`)"
_AUTHORIZATION_HELP = (
    "acls: its service accounts may do only what an ACL allows (Kafka's "
    "allow.everyone.if.no.acl.found=false); open: a resource no ACL names is open to them (=true)"
)


def _tenant_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "tenants", "tenants")
    create = verbs.add_parser(
        "create",
        help="create a tenant on a plan",
        epilog="example: pier admin tenants create --display-name Acme --plan free",
        description="Create a tenant on a plan. It gets the plan's limits (unless all four "
        "--max-* limits are given) and the plan's quotas as its /config/users/<default> "
        "quotas.",
    )
    create.add_argument("--display-name", required=True, help="the tenant's name for people")
    create.add_argument("--plan", required=True, help=_PLAN_HELP)
    create.add_argument("--id", default=None, help="tenant id (generated when absent)")
    create.add_argument(
        "--authorization",
        choices=["acls", "open"],
        default=None,
        help=_AUTHORIZATION_HELP + " (default: the plan's; the default plans say acls)",
    )
    create.add_argument(
        "--idempotency-key",
        default=None,
        help="a repeated create with the same key returns the first one's tenant",
    )
    _with_limits(create, "default: the plan's")
    listing = verbs.add_parser("list", help="tenants, a page at a time")
    listing.add_argument(
        "--status",
        choices=["active", "suspended", "deleted"],
        default=None,
        help="only tenants in this state (default: all)",
    )
    _paged(listing)
    update = verbs.add_parser("update", help="change a tenant's name, plan, authorization, limits")
    update.add_argument("tenant", help=_TENANT_HELP)
    update.add_argument("--display-name", default=None, help="a new name (absent: unchanged)")
    update.add_argument(
        "--plan",
        default=None,
        help=_PLAN_HELP + "; moving takes the new plan's limits, quotas and authorization",
    )
    update.add_argument(
        "--authorization",
        choices=["acls", "open"],
        default=None,
        help=_AUTHORIZATION_HELP + " (absent: unchanged)",
    )
    _with_limits(update, "absent: unchanged")
    for verb, text in (
        ("get", "one tenant"),
        ("delete", "mark a tenant deleted: its keys and open connections stop working"),
        ("suspend", "refuse the tenant's connections and requests until it is resumed"),
        ("resume", "let a suspended tenant in again"),
    ):
        verbs.add_parser(verb, help=text).add_argument("tenant", help=_TENANT_HELP)


def _account_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "service-accounts", "a tenant's service accounts")
    create = verbs.add_parser(
        "create",
        help="create a service account (the principal User:<its id> in ACLs and quotas)",
        epilog="example: pier admin service-accounts create acme --name orders-app",
    )
    create.add_argument("tenant", help=_TENANT_HELP)
    create.add_argument("--name", required=True, help="its name, unique in the tenant")
    create.add_argument("--description", default=None, help="free text")
    listing = verbs.add_parser("list", help="the tenant's service accounts, a page at a time")
    listing.add_argument("tenant", help=_TENANT_HELP)
    _paged(listing)


def _key_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "api-keys", "a tenant's API keys")
    create = verbs.add_parser(
        "create",
        help="create an API key; its secret is shown once",
        description="Create an API key for a service account. The key id is the SASL username"
        " and HTTP Basic user, the secret its password; the secret is printed once and never"
        " again.",
        epilog="example: pier admin api-keys create acme --service-account sa-...",
    )
    create.add_argument("tenant", help=_TENANT_HELP)
    create.add_argument("--service-account", required=True, help="service account id")
    create.add_argument("--description", default=None, help="free text")
    create.add_argument(
        "--expires-at", default=None, help="RFC 3339 timestamp (default: never expires)"
    )
    listing = verbs.add_parser("list", help="the tenant's API keys (never their secrets)")
    listing.add_argument("tenant", help=_TENANT_HELP)
    _paged(listing)
    revoke = verbs.add_parser(
        "revoke", help="revoke a key: every gateway refuses it before this answers"
    )
    revoke.add_argument("key", help="the key id")


def _quota_value(text: str) -> tuple[str, float | None]:
    """NAME=VALUE in Kafka's units: byte rates whole bytes/s, the others numbers; none removes."""
    name, sep, value = text.partition("=")
    if not sep or name not in QUOTA_NAMES:
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE with NAME one of {', '.join(QUOTA_NAMES)}, got {text!r}"
        )
    if value.lower() in ("none", "null", ""):
        return name, None
    if name in BYTE_RATE_QUOTAS:
        if not value.isascii() or not value.isdigit() or int(value) < 1:
            raise argparse.ArgumentTypeError(
                f"{name} takes a whole number of bytes per second, at least 1, as Kafka's "
                f"(e.g. {name}=1048576 for 1 MiB/s), not {value!r}"
            )
        return name, int(value)
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 < number < float("inf"):
        raise argparse.ArgumentTypeError(
            f"{name} takes a positive number (e.g. {name}=50), not {value!r}"
        )
    return name, number


_QUOTA_EPILOG = """A quota entity is Kafka's (user, client-id) pair, as kafka-configs names it:
  --user SA                  the service account SA (its id, e.g. sa-...)
  --user-defaults            every user of the tenant without a quota of its own (<default>)
  --client CLIENT            the client id CLIENT (also --client-id)
  --client-defaults          every client id without a quota of its own (<default>)
Give a user part, a client part, or both; a part left out is not part of the entity.
Quotas (Kafka's names and units): producer_byte_rate and consumer_byte_rate in whole
bytes/s; request_percentage in % of one request-handling thread; controller_mutation_rate in
partitions created or deleted per second. The most specific entity that sets a quota wins
(Kafka's order; `quotas effective` shows which). A tenant's plan sets its --user-defaults quotas.
"""


def _entity_flags(parser: argparse.ArgumentParser) -> None:
    user = parser.add_mutually_exclusive_group()
    user.add_argument("--user", default=None, metavar="SA", help="service account id")
    user.add_argument(
        "--user-defaults",
        dest="user",
        action="store_const",
        const=DEFAULT_ENTITY,
        help="the tenant's default user (<default>)",
    )
    client = parser.add_mutually_exclusive_group()
    client.add_argument(
        "--client",
        "--client-id",
        dest="client_id",
        default=None,
        metavar="CLIENT",
        help="client id",
    )
    client.add_argument(
        "--client-defaults",
        dest="client_id",
        action="store_const",
        const=DEFAULT_ENTITY,
        help="the default client id (<default>)",
    )


def _quota_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "quotas", "a tenant's client quotas (Kafka's quota entities)")
    raw = argparse.RawDescriptionHelpFormatter
    put = verbs.add_parser(
        "set",
        help="set quotas of one entity",
        description="Set (or with VALUE none remove) quotas of one entity.",
        epilog=_QUOTA_EPILOG,
        formatter_class=raw,
    )
    put.add_argument("tenant", help=_TENANT_HELP)
    _entity_flags(put)
    put.add_argument(
        "--quota",
        type=_quota_value,
        action="append",
        required=True,
        metavar="NAME=VALUE",
        help="repeatable; e.g. producer_byte_rate=1048576 (VALUE none removes that quota)",
    )
    verbs.add_parser("get", help="list every entity's quotas").add_argument(
        "tenant", help=_TENANT_HELP
    )
    delete = verbs.add_parser(
        "delete", help="remove every quota of one entity", epilog=_QUOTA_EPILOG, formatter_class=raw
    )
    delete.add_argument("tenant", help=_TENANT_HELP)
    _entity_flags(delete)
    effective = verbs.add_parser(
        "effective",
        help="the quotas a connection gets",
        description="Each quota a connection of USER with client id CLIENT gets, and the entity "
        "that sets it.",
    )
    effective.add_argument("tenant", help=_TENANT_HELP)
    effective.add_argument("--user", required=True, metavar="SA", help="service account id")
    effective.add_argument(
        "--client", "--client-id", dest="client_id", required=True, metavar="CLIENT",
        help="client id ('' for none)",
    )  # fmt: skip


def _acl_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "acls", "a tenant's ACLs")
    create = verbs.add_parser(
        "create",
        help="allow or deny a principal an operation on resources",
        epilog="example: pier admin acls create acme --principal User:sa-... --resource-type"
        " TOPIC --pattern-type prefixed --resource-name orders --operation WRITE --permission"
        " allow",
    )
    create.add_argument("tenant", help=_TENANT_HELP)
    for flag, text in _ACL_FLAGS.items():
        create.add_argument("--" + flag, required=True, help=text)
    create.add_argument("--host", default=None, help="the client address it applies to (default *)")
    listing = verbs.add_parser("list", help="the tenant's ACLs, a page at a time")
    listing.add_argument("tenant", help=_TENANT_HELP)
    _paged(listing)
    delete = verbs.add_parser("delete", help="one ACL by id, or every ACL matching the filters")
    delete.add_argument("tenant", help=_TENANT_HELP)
    delete.add_argument(
        "acl_id", nargs="?", default=None, help="the ACL's id (absent: every ACL matching)"
    )
    for flag, text in {**_ACL_FLAGS, "host": "the client address"}.items():
        delete.add_argument("--" + flag, default=None, help=f"only ACLs with this {text}")


def _plan_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "plans", "plans: prices, limits and default quotas (docs/plans.md)")
    verbs.add_parser("list", help="every plan (free, standard, enterprise from the start)")
    verbs.add_parser("get", help="one plan").add_argument("name", help="the plan's name")
    put = verbs.add_parser("put", help="create or replace a plan (docs/plans.md has the format)")
    put.add_argument("name", help="the plan's name")
    put.add_argument("--file", required=True, help="JSON plan document ('-' for stdin)")


def _gateway_parsers(resources: Any) -> None:
    verbs = _verbs(resources, "gateways", "running gateways and the change version each applied")
    verbs.add_parser(
        "list",
        help="gateways heard from in the last 10 s: an ACL change, a revocation or a tenant "
        "change is answered once all of them applied it (at most 1 s)",
    )


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
    # SQLAlchemy's first line is the driver's whole message; the rest is a link to its FAQ.
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return OperationError(
        f"tenant store: {type(exc).__name__}: {first_line}; check that --db names a reachable "
        "store (sqlite:///ABSOLUTE/PATH or postgresql+psycopg://USER@HOST:PORT/DB)"
    )


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
        gateways = tuple(url.rstrip("/") for url in args.gateway_http)
        return asyncio.run(
            _serve_forever(store, args.host, args.port, gateways, zookeeper=args.zookeeper)
        )
    except SQLAlchemyError as exc:
        raise OperationError(
            f"tenant store not usable ({type(exc).__name__}): run `pier tenancy init --db URL` "
            "first to create its schema, and check that the URL names a reachable store"
        ) from None
    except OSError as exc:
        raise OperationError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    finally:
        store.close()


async def _serve_forever(
    store: Any,
    host: str,
    port: int,
    gateway_http: tuple[str, ...] = (),
    *,
    zookeeper: str | None = None,
) -> int:
    from aiohttp import web

    from tenancy.api import create_app
    from tenancy.api.metrics import PathAccessLogger

    app = create_app(store, gateway_http=gateway_http)
    if zookeeper:
        from tenancy.api import fleet_registrations

        fleet_registrations.install(app, zookeeper)
    runner = web.AppRunner(app, access_log_class=PathAccessLogger)
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
