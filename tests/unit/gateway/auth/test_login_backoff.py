"""`LoginBackoff` with an injected clock: free failures, exponential waits per address (IPv6 per
/64), checks under way counted once an address has failed, the per-key budget for suspect addresses only, forgiveness after
a quiet period, and bounded tables."""

from __future__ import annotations

import pytest

from gateway.auth.backoff import BackoffPolicy, LoginBackoff, Ticket, address_key
from gateway.config import GatewayConfig, GatewayConfigError

pytestmark = pytest.mark.unit
KEY = "KEYID00000000001"
HASH_SETTINGS = ("threads", "queue.size", "queue.timeout.ms")
POLICY = BackoffPolicy(free_failures=3, initial_s=1.0, max_s=8.0, key_burst=2, key_refill_s=5.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def backoff(policy: BackoffPolicy = POLICY) -> tuple[LoginBackoff, Clock]:
    clock = Clock()
    return LoginBackoff(policy, clock), clock


def fail(guard: LoginBackoff, peer: str, key: str = KEY) -> None:
    ticket = guard.admit(peer, key)
    assert ticket is not None, f"{peer} refused"
    guard.failed(ticket)


def test_the_free_failures_then_doubling_waits_from_the_last_failure() -> None:
    guard, clock = backoff()
    for _ in range(3):
        fail(guard, "10.0.0.1", f"KEYID0000000000{_}")  # other keys: no key budget involved
    assert guard.admit("10.0.0.1", "KEYID00000000009") is None
    assert guard.wait_s("10.0.0.1") == 1.0
    clock.now += 0.999
    assert guard.admit("10.0.0.1", "KEYID00000000009") is None
    clock.now += 0.001
    fail(guard, "10.0.0.1", "KEYID00000000009")  # the 4th failure: the next wait is 2 s
    clock.now += 1.5
    assert guard.admit("10.0.0.1", "KEYID00000000008") is None
    clock.now += 0.5
    fail(guard, "10.0.0.1", "KEYID00000000008")
    assert guard.wait_s("10.0.0.1") == 4.0
    assert [POLICY.delay_s(n) for n in range(3, 9)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_refused_attempts_do_not_extend_the_wait() -> None:
    guard, clock = backoff()
    for index in range(3):
        fail(guard, "10.0.0.1", f"KEYID0000000000{index}")
    for _ in range(100):
        assert guard.admit("10.0.0.1", "KEYID00000000005") is None
        clock.now += 0.009
    clock.now += 0.2  # 1.1 s after the last failure
    assert guard.admit("10.0.0.1", "KEYID00000000005") is not None


def test_other_addresses_are_not_slowed() -> None:
    guard, _ = backoff()
    for index in range(3):
        fail(guard, "10.0.0.1", f"KEYID0000000000{index}")
    assert guard.admit("10.0.0.1", "KEYID00000000007") is None
    assert guard.admit("10.0.0.2", "KEYID00000000007") is not None
    assert guard.wait_s("10.0.0.2") == 0.0


def test_checks_under_way_count_until_they_end_once_the_address_has_failed() -> None:
    guard, _ = backoff()
    fail(guard, "10.0.0.1", "KEYID00000000009")
    tickets = [guard.admit("10.0.0.1", f"KEYID0000000000{i}") for i in range(2)]
    assert all(tickets)
    assert guard.admit("10.0.0.1", "KEYID00000000005") is None  # 3 pending: no 4th in parallel
    for ticket in tickets:
        assert ticket is not None
        guard.succeeded(ticket)
    assert guard.admit("10.0.0.1", "KEYID00000000005") is not None


def test_a_clean_address_logs_in_many_keys_at_once_each_beyond_the_first_paying_its_key() -> None:
    """Many clients behind one NAT, each with its own key, logging in together."""
    guard, _ = backoff()
    tickets = [guard.admit("10.0.0.1", f"KEYID000000000{i:02}") for i in range(20)]
    assert all(tickets)
    assert [ticket.paid_key_token for ticket in tickets if ticket is not None] == [False] + [
        True
    ] * 19


def test_a_first_burst_of_guesses_against_one_key_gets_the_key_budget() -> None:
    guard, _ = backoff()
    admitted = [guard.admit("10.0.0.1", KEY) for _ in range(10)]
    assert sum(ticket is not None for ticket in admitted) == 1 + POLICY.key_burst


def test_abandoned_checks_are_not_failures() -> None:
    guard, _ = backoff()
    for _ in range(10):
        ticket = guard.admit("10.0.0.1", f"KEYID0000000000{_ % 10}")
        assert ticket is not None
        guard.abandoned(ticket)
    assert guard.wait_s("10.0.0.1") == 0.0


def test_a_success_does_not_forgive_earlier_failures() -> None:
    guard, _ = backoff()
    for index in range(2):
        fail(guard, "10.0.0.1", f"KEYID0000000000{index}")
    ticket = guard.admit("10.0.0.1", "KEYID00000000005")
    assert ticket is not None
    guard.succeeded(ticket)
    fail(guard, "10.0.0.1", "KEYID00000000006")
    assert guard.admit("10.0.0.1", "KEYID00000000007") is None


def test_an_address_quiet_for_the_longest_backoff_is_forgiven() -> None:
    guard, clock = backoff()
    for index in range(6):
        clock.now += POLICY.delay_s(index)
        fail(guard, "10.0.0.1", f"KEYID0000000000{index}")
    clock.now += 7.9
    assert guard.admit("10.0.0.1", "KEYID00000000007") is None
    clock.now += 0.1
    tickets = [guard.admit("10.0.0.1", f"KEYID0000000000{i}") for i in range(3)]
    assert all(tickets), "all three free failures again"


def test_a_note_failure_counts_like_a_failed_check() -> None:
    guard, _ = backoff()
    for _ in range(3):
        guard.note_failure("10.0.0.1")
    assert guard.admit("10.0.0.1", KEY) is None


def test_the_key_budget_binds_suspect_addresses_only() -> None:
    """Guessers on many addresses, each with one failure behind it, share the key's 2 tokens;
    the owner's clean address needs none."""
    guard, clock = backoff()
    for index in range(5):
        fail(guard, f"10.0.1.{index}")  # clean: free of the budget
    paid = [guard.admit(f"10.0.1.{index}", KEY) for index in range(5)]
    assert [ticket is not None for ticket in paid] == [True, True, False, False, False]
    assert guard.admit("192.0.2.7", KEY) is not None, "the owner's clean address gets its check"
    assert guard.admit("10.0.1.4", "KEYID00000000002") is not None, "another key's budget is whole"
    clock.now += 5.0
    assert guard.admit("10.0.1.2", KEY) is not None, "a token back after the refill interval"
    assert guard.admit("10.0.1.3", KEY) is None


def test_a_success_refunds_the_key_token() -> None:
    guard, _ = backoff()
    fail(guard, "10.0.1.1")
    for _ in range(5):
        ticket = guard.admit("10.0.1.1", KEY)
        assert isinstance(ticket, Ticket) and ticket.paid_key_token
        guard.succeeded(ticket)


def test_ipv6_addresses_count_per_64_and_mapped_ipv4_as_ipv4() -> None:
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert address_key("fe80::1%eth0") == "fe80::/64"
    assert address_key("") == "" and address_key("/run/pier.sock") == "/run/pier.sock"
    guard, _ = backoff()
    for index in range(3):
        fail(guard, f"2001:db8:1:2::{index + 1}", f"KEYID0000000000{index}")
    assert guard.admit("2001:db8:1:2:ffff::1", "KEYID00000000005") is None


def test_the_tables_are_bounded() -> None:
    guard, _ = backoff(BackoffPolicy(free_failures=1, max_tracked=4))
    for index in range(10):
        fail(guard, f"10.0.2.{index}", f"KEYID000000000{index:02}")
    assert len(guard._addresses) == 4 and len(guard._keys) <= 4
    assert guard.admit("10.0.2.9", "KEYID00000000099") is None  # the newest are kept


def test_the_policy_from_the_gateway_settings_and_their_checks() -> None:
    defaults = GatewayConfig(bootstrap="b:9092", db_url="sqlite://", port=9092)
    assert BackoffPolicy.from_settings(defaults.setting) == BackoffPolicy()
    assert [defaults.setting(f"sasl.hash.{name}") for name in HASH_SETTINGS] == [1, 32, 5000]
    tuned = GatewayConfig(
        bootstrap="b:9092",
        db_url="sqlite://",
        port=9092,
        properties={
            "sasl.failure.backoff.free.failures": "2",
            "sasl.failure.backoff.ms": "250",
            "sasl.failure.backoff.max.ms": "4000",
            "sasl.key.check.burst": "3",
            "sasl.key.check.refill.ms": "500",
        },
    )
    assert BackoffPolicy.from_settings(tuned.setting) == BackoffPolicy(2, 0.25, 4.0, 3, 0.5)
    for name, bad in (("sasl.hash.threads", "0"), ("sasl.key.check.burst", "0")):
        with pytest.raises(GatewayConfigError, match=name):
            GatewayConfig(bootstrap="b:9092", db_url="sqlite://", port=9092, properties={name: bad})
