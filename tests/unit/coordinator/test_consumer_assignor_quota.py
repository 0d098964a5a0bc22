"""The `uniform` assignor gives a new member its share: previous owners keep at most their quota
(`base`, or `base + 1` for as many members as there are extra partitions), never more."""

from __future__ import annotations

from brokers.coordinator.consumer_assignors import assign


def test_a_third_member_gets_a_partition_of_four() -> None:
    subscriptions = {m: frozenset({"t"}) for m in ("a", "b", "c")}
    previous = {"a": {"t": {0, 1}}, "b": {"t": {2, 3}}}
    target = assign("uniform", subscriptions, {"t": 4}, previous)
    loads = sorted(len(target[m].get("t", set())) for m in subscriptions)
    assert loads == [1, 1, 2]
    assert target["a"]["t"] <= {0, 1} and target["b"]["t"] <= {2, 3}, "owners keep what they can"


def test_balanced_shares_are_sticky() -> None:
    subscriptions = {m: frozenset({"t"}) for m in ("a", "b", "c")}
    previous = {"a": {"t": {0, 1}}, "b": {"t": {2, 3}}, "c": {"t": {4}}}
    assert assign("uniform", subscriptions, {"t": 5}, previous) == previous
