"""`Authorizer`: Kafka's ACL semantics over a tenant's bindings, one table row per rule."""

from __future__ import annotations

import itertools

import pytest

from gateway.kafka.authorizer import Authorizer
from tenancy.domain import Acl

pytestmark = pytest.mark.unit
ALICE, BOB = "User:sa-alice", "User:sa-bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"
_ids = itertools.count()


def acl(
    operation: str,
    name: str,
    *,
    pattern: str = "literal",
    permission: str = "allow",
    principal: str = ALICE,
    host: str = "*",
    resource_type: str = "TOPIC",
) -> Acl:
    return Acl(
        f"acl-{next(_ids)}",
        "acme",
        resource_type,
        pattern,
        name,
        operation,
        permission,
        principal,
        host,
    )


# (bindings, principal, host, operation, resource type, name, allowed)
CASES = [
    ("literal match", [acl("READ", "orders")], ALICE, HOST, "READ", "TOPIC", "orders", True),
    ("literal is exact", [acl("READ", "orders")], ALICE, HOST, "READ", "TOPIC", "orders-2", False),
    ("prefix matches", [acl("READ", "ord", pattern="prefixed")], ALICE, HOST, "READ", "TOPIC", "orders", True),
    ("prefix equal to name", [acl("READ", "orders", pattern="prefixed")], ALICE, HOST, "READ", "TOPIC", "orders", True),
    ("prefix longer than name", [acl("READ", "orders-x", pattern="prefixed")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("prefix is not substring", [acl("READ", "ders", pattern="prefixed")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("literal * wildcard", [acl("READ", "*")], ALICE, HOST, "READ", "TOPIC", "anything", True),
    ("prefixed * is a plain prefix", [acl("READ", "*", pattern="prefixed")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("other resource type", [acl("READ", "orders", resource_type="GROUP")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("other principal", [acl("READ", "orders")], BOB, HOST, "READ", "TOPIC", "orders", False),
    ("wildcard principal", [acl("READ", "orders", principal="User:*")], BOB, HOST, "READ", "TOPIC", "orders", True),
    ("host must match", [acl("READ", "orders", host=HOST)], ALICE, OTHER_HOST, "READ", "TOPIC", "orders", False),
    ("exact host", [acl("READ", "orders", host=HOST)], ALICE, HOST, "READ", "TOPIC", "orders", True),
    ("ipv4-mapped client", [acl("READ", "orders", host=HOST)], ALICE, f"::ffff:{HOST}", "READ", "TOPIC", "orders", True),
    ("other operation", [acl("READ", "orders")], ALICE, HOST, "WRITE", "TOPIC", "orders", False),
    ("ALL allows all", [acl("ALL", "orders")], ALICE, HOST, "ALTER_CONFIGS", "TOPIC", "orders", True),
    ("READ implies DESCRIBE", [acl("READ", "orders")], ALICE, HOST, "DESCRIBE", "TOPIC", "orders", True),
    ("WRITE implies DESCRIBE", [acl("WRITE", "orders")], ALICE, HOST, "DESCRIBE", "TOPIC", "orders", True),
    ("DELETE implies DESCRIBE", [acl("DELETE", "orders")], ALICE, HOST, "DESCRIBE", "TOPIC", "orders", True),
    ("ALTER implies DESCRIBE", [acl("ALTER", "orders")], ALICE, HOST, "DESCRIBE", "TOPIC", "orders", True),
    ("CREATE does not imply DESCRIBE", [acl("CREATE", "orders")], ALICE, HOST, "DESCRIBE", "TOPIC", "orders", False),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl("ALTER_CONFIGS", "orders")], ALICE, HOST, "DESCRIBE_CONFIGS", "TOPIC", "orders", True),
    ("DESCRIBE implies nothing", [acl("DESCRIBE", "orders")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("deny beats allow", [acl("READ", "orders"), acl("READ", "orders", permission="deny")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("prefixed deny beats literal allow", [acl("ALL", "orders"), acl("WRITE", "ord", pattern="prefixed", permission="deny")], ALICE, HOST, "WRITE", "TOPIC", "orders", False),
    ("wildcard deny beats literal allow", [acl("READ", "orders"), acl("READ", "*", permission="deny", principal="User:*")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("deny ALL denies every operation", [acl("READ", "orders"), acl("ALL", "orders", permission="deny")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("deny is only for its operation", [acl("ALL", "orders"), acl("WRITE", "orders", permission="deny")], ALICE, HOST, "READ", "TOPIC", "orders", True),
    ("deny READ does not deny DESCRIBE", [acl("READ", "orders"), acl("DESCRIBE", "orders"), acl("READ", "orders", permission="deny")], ALICE, HOST, "DESCRIBE", "TOPIC", "orders", True),
    ("deny DESCRIBE beats READ's implied DESCRIBE", [acl("READ", "orders"), acl("DESCRIBE", "orders", permission="deny")], ALICE, HOST, "DESCRIBE", "TOPIC", "orders", False),
    ("deny for another host", [acl("READ", "orders"), acl("READ", "orders", permission="deny", host=OTHER_HOST)], ALICE, HOST, "READ", "TOPIC", "orders", True),
    ("deny for another principal", [acl("READ", "orders", principal="User:*"), acl("READ", "orders", permission="deny", principal=BOB)], ALICE, HOST, "READ", "TOPIC", "orders", True),
    ("no matching allow", [acl("READ", "payments")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("deny only, no allow", [acl("READ", "payments", permission="deny")], ALICE, HOST, "READ", "TOPIC", "orders", False),
    ("cluster binding", [acl("CREATE", "kafka-cluster", resource_type="CLUSTER")], ALICE, HOST, "CREATE", "CLUSTER", "kafka-cluster", True),
    ("groups are their own namespace", [acl("READ", "app", pattern="prefixed", resource_type="GROUP")], ALICE, HOST, "READ", "GROUP", "app-1", True),
    ("enum spelling is normalised", [Acl("x", "acme", "topic", "LITERAL", "orders", "read", "ALLOW", ALICE, "*")], ALICE, HOST, "READ", "TOPIC", "orders", True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("bindings", "principal", "host", "operation", "resource_type", "name", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_allowed(
    bindings: list[Acl],
    principal: str,
    host: str,
    operation: str,
    resource_type: str,
    name: str,
    expected: bool,
) -> None:
    authorizer = Authorizer(bindings)
    assert authorizer.allowed(principal, host, operation, resource_type, name) is expected


# Kafka's authorizeByResourceType: (bindings, operation, allowed on some TOPIC)
ANY_CASES = [
    ("no binding", [acl("READ", "x", resource_type="GROUP")], "WRITE", False),
    ("a literal allow", [acl("WRITE", "orders")], "WRITE", True),
    ("a prefixed allow", [acl("WRITE", "ord", pattern="prefixed")], "WRITE", True),
    ("ALL counts", [acl("ALL", "orders")], "WRITE", True),
    ("implied ops do not count", [acl("READ", "orders")], "DESCRIBE", False),
    ("literal allow, same literal deny", [acl("WRITE", "orders"), acl("WRITE", "orders", permission="deny")], "WRITE", False),
    ("literal allow, covering prefix deny", [acl("WRITE", "orders"), acl("WRITE", "or", pattern="prefixed", permission="deny")], "WRITE", False),
    ("prefix allow, literal deny of it", [acl("WRITE", "ord", pattern="prefixed"), acl("WRITE", "ord", permission="deny")], "WRITE", True),
    ("prefix allow, longer prefix deny", [acl("WRITE", "ord", pattern="prefixed"), acl("WRITE", "orders", pattern="prefixed", permission="deny")], "WRITE", True),
    ("prefix allow, shorter prefix deny", [acl("WRITE", "ord", pattern="prefixed"), acl("WRITE", "o", pattern="prefixed", permission="deny")], "WRITE", False),
    ("one of two allows undominated", [acl("WRITE", "a"), acl("WRITE", "b"), acl("WRITE", "a", permission="deny")], "WRITE", True),
    ("wildcard allow", [acl("WRITE", "*"), acl("WRITE", "orders", permission="deny")], "WRITE", True),
    ("wildcard deny wins", [acl("WRITE", "*"), acl("WRITE", "*", permission="deny")], "WRITE", False),
    ("wildcard deny wins whatever the order", [acl("WRITE", "*", permission="deny"), acl("WRITE", "orders")], "WRITE", False),
    ("deny for another op", [acl("WRITE", "orders"), acl("READ", "orders", permission="deny")], "WRITE", True),
    ("allow for another principal", [acl("WRITE", "orders", principal=BOB)], "WRITE", False),
    ("allow for another host", [acl("WRITE", "orders", host=OTHER_HOST)], "WRITE", False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("bindings", "operation", "expected"),
    [case[1:] for case in ANY_CASES],
    ids=[case[0] for case in ANY_CASES],
)
def test_allowed_any(bindings: list[Acl], operation: str, expected: bool) -> None:
    assert Authorizer(bindings).allowed_any(ALICE, HOST, operation, "TOPIC") is expected


def test_acls_required_denies_a_tenant_without_acls() -> None:
    authorizer = Authorizer([])
    assert not authorizer.allowed(ALICE, HOST, "READ", "TOPIC", "orders")
    assert not authorizer.allowed(BOB, HOST, "CREATE", "CLUSTER", "kafka-cluster")
    assert not authorizer.allowed_any(ALICE, HOST, "WRITE", "TOPIC")


def test_open_mode_opens_what_no_binding_names() -> None:
    authorizer = Authorizer([], required=False)
    assert authorizer.allowed(ALICE, HOST, "ALTER_CONFIGS", "TOPIC", "orders")
    assert authorizer.allowed(BOB, HOST, "CREATE", "CLUSTER", "kafka-cluster")
    assert authorizer.allowed_any(ALICE, HOST, "WRITE", "TRANSACTIONAL_ID")


def test_open_mode_decides_a_named_resource_by_its_bindings() -> None:
    """Kafka's allow.everyone.if.no.acl.found=true: any binding on the resource (another
    principal's, a DENY) takes the open fallback away for that resource only."""
    authorizer = Authorizer(
        [acl("WRITE", "orders"), acl("WRITE", "audit", permission="deny", principal=BOB)],
        required=False,
    )
    assert authorizer.allowed(ALICE, HOST, "WRITE", "TOPIC", "orders")
    assert not authorizer.allowed(BOB, HOST, "WRITE", "TOPIC", "orders")
    assert not authorizer.allowed(BOB, HOST, "WRITE", "TOPIC", "audit")
    assert not authorizer.allowed(ALICE, HOST, "WRITE", "TOPIC", "audit")  # named, no allow
    assert authorizer.allowed(BOB, HOST, "WRITE", "TOPIC", "payments")  # named by nothing
    assert authorizer.allowed(BOB, HOST, "READ", "GROUP", "orders")


def test_open_mode_allowed_any_unless_a_wildcard_names_every_resource() -> None:
    assert Authorizer([acl("WRITE", "orders", principal=BOB)], required=False).allowed_any(
        ALICE, HOST, "WRITE", "TOPIC"
    )
    everything = [acl("READ", "*", principal=BOB)]
    assert not Authorizer(everything, required=False).allowed_any(ALICE, HOST, "WRITE", "TOPIC")
    assert Authorizer(everything, required=False).allowed_any(BOB, HOST, "READ", "TOPIC")


def test_the_mode_never_depends_on_how_many_acls_there_are() -> None:
    """Attack #9 of issue 21: deleting the last ACL must not open a tenant whose accounts need
    ACLs (and the first ACL does not close an open tenant beyond the resources it names)."""
    one = [acl("READ", "orders", resource_type="GROUP")]
    assert not Authorizer(one).allowed(ALICE, HOST, "WRITE", "TOPIC", "orders")
    assert not Authorizer([]).allowed(ALICE, HOST, "WRITE", "TOPIC", "orders")
    assert Authorizer(one, required=False).allowed(ALICE, HOST, "WRITE", "TOPIC", "orders")
    assert Authorizer([], required=False).allowed(ALICE, HOST, "WRITE", "TOPIC", "orders")


def test_many_prefixes_of_different_lengths() -> None:
    bindings = [acl("READ", "a" * length, pattern="prefixed") for length in (3, 7, 12)]
    bindings.append(acl("READ", "aaaaaaa", pattern="prefixed", permission="deny", principal=BOB))
    authorizer = Authorizer(bindings)
    assert authorizer.allowed(ALICE, HOST, "READ", "TOPIC", "aaaa")
    assert not authorizer.allowed(ALICE, HOST, "READ", "TOPIC", "aa")
    assert authorizer.allowed(BOB, HOST, "READ", "TOPIC", "aaa") is False  # no allow for bob


@pytest.mark.parametrize(
    ("operation", "resource_type"), [("ANY", "TOPIC"), ("READ", "ANY"), ("read", "TOPIC")]
)
def test_unknown_operations_and_types_are_programming_errors(
    operation: str, resource_type: str
) -> None:
    with pytest.raises(ValueError):
        Authorizer([]).allowed(ALICE, HOST, operation, resource_type, "orders")
    with pytest.raises(ValueError):
        Authorizer([]).allowed_any(ALICE, HOST, operation, resource_type)
