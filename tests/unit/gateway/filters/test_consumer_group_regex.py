"""A tenant's SubscribedTopicRegex rewritten into the fleet namespace
(`gateway.kafka.filters.consumer_group_regex`): whatever the tenant sends, the regex the brokers
get (RE2, whole-name match, as they evaluate it) matches only the tenant's own fleet names, and
matches exactly the tenant's names the tenant's regex matches; invalid ones are refused; Describe
gets the tenant's regex back; another tenant's wrapping is never shown."""

from __future__ import annotations

import pytest
import re2  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.wire.request_patterns import MAX_PATTERN_CHARS
from gateway.kafka.filters.consumer_group_regex import RefusedRegex, to_fleet, to_tenant
from gateway.kafka.namespace import TenantNamespace

ACME = TenantNamespace("acme")
BOLT = TenantNamespace("bolt")
LOCAL = ["orders", "orders-eu", "ledger", "a", "__audit", "x.y_z", "ORDERS", "acme_orders"]
OTHERS = [
    "bolt_orders", "bolt_ledger", "__consumer_offsets", "__transaction_state", "__usage",
    "orders", "acme", "acmex_orders", "acm_orders", "xacme_orders",
]  # fmt: skip


def fleet_matches(fleet_regex: str, names: list[str]) -> set[str]:
    compiled = re2.compile(fleet_regex)
    return {n for n in names if compiled.fullmatch(n) is not None}


@pytest.mark.parametrize(
    "regex",
    [".*", "(?i).*", "(?s).*", "^.*", "(^.*)", "(^orders.*)|(^ledger)", r"\Q.*", r"\Qa)|(.*",
     r"\Qorders\E.*", ".*|.*", "(?i)BOLT_.*", "[^_]*", "[[:^alpha:]]*", "\\A.*", "(?:)|.*",
     "x*", ".{0,300}"],
)  # fmt: skip
def test_only_the_tenants_names_ever_match(regex: str) -> None:
    fleet = to_fleet(ACME, regex)
    assert isinstance(fleet, str), fleet
    assert not fleet_matches(fleet, OTHERS), "another tenant's or an internal topic matched"
    local = re2.compile(regex)
    wanted = {ACME.fleet(n) for n in LOCAL if local.fullmatch(n) is not None}
    assert fleet_matches(fleet, [ACME.fleet(n) for n in LOCAL]) == wanted
    assert to_tenant(ACME, fleet) in (regex, regex + "\\E")


@pytest.mark.parametrize("regex", ["a)|(.*", "(", "[", "\\", "(?<=a)b", "a\\E", "*", "a**"])
def test_invalid_regexes_are_refused(regex: str) -> None:
    assert isinstance(to_fleet(ACME, regex), RefusedRegex)


def test_long_regexes_are_refused() -> None:
    assert isinstance(to_fleet(ACME, "a" * (MAX_PATTERN_CHARS + 1)), RefusedRegex)
    near = to_fleet(ACME, "a" * (MAX_PATTERN_CHARS - 5))
    assert isinstance(near, RefusedRegex) and "in this namespace" in near.reason
    assert isinstance(to_fleet(ACME, "a" * 900), str)


def test_describe_shows_only_this_tenants_wrapping() -> None:
    fleet = to_fleet(BOLT, "(^orders.*)")
    assert isinstance(fleet, str)
    assert to_tenant(BOLT, fleet) == "(^orders.*)"
    assert to_tenant(ACME, fleet) is None
    assert to_tenant(ACME, ".*") is None
    assert to_tenant(ACME, None) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab_.*+?|()[]^$\\QEAi{}:-,0123", max_size=24))
def test_no_regex_escapes_the_namespace(regex: str) -> None:
    fleet = to_fleet(ACME, regex)
    if isinstance(fleet, RefusedRegex):
        return
    assert not fleet_matches(fleet, [*OTHERS, "bolt_a", "bolt_ab", "_a", "__a", "b_a"])
