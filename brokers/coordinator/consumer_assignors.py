"""Server-side assignors of KIP-848 consumer groups: `uniform` (the default) and `range`.

Owns: `assign(name, members, partitions, previous)` → the target assignment, member id →
{topic: partitions}. `uniform` keeps a partition with its previous target owner while that owner
is under its quota, then gives the rest to the least-loaded subscribed member (balanced for
homogeneous subscriptions, as Kafka's UniformAssignor; greedy for heterogeneous ones). `range`
splits each topic's partitions into contiguous ranges over its subscribers sorted by member id,
as Kafka's RangeAssignor without its stickiness. Pure and deterministic; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping

Assignment = dict[str, dict[str, set[int]]]
UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)


def assign(
    name: str,
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    previous: Assignment,
) -> Assignment:
    """`subscriptions`: member → topics; `partitions`: topic → count (unknown topics absent)."""
    if name == RANGE:
        return _range(subscriptions, partitions)
    return _uniform(subscriptions, partitions, previous)


def _empty(subscriptions: Mapping[str, frozenset[str]]) -> Assignment:
    return {member: {} for member in subscriptions}


def _range(
    subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int]
) -> Assignment:
    result = _empty(subscriptions)
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        count = partitions[topic]
        base, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = base + (1 if i < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return result


def _uniform(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    previous: Assignment,
) -> Assignment:
    result = _empty(subscriptions)
    if not subscriptions:
        return result
    every = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
    wanted = [(t, p) for t, p in every if any(t in s for s in subscriptions.values())]
    # Each member may keep `base` of its previous partitions, and `extra` of them one more, so a
    # new member gets its share (4 partitions, 3 members: 2, 1, 1, never 2, 2, 0).
    base, extra = divmod(len(wanted), len(subscriptions))
    load = dict.fromkeys(subscriptions, 0)
    owner_of = {
        (t, p): member
        for member, topics in previous.items()
        for t, parts in topics.items()
        for p in parts
    }
    kept: set[tuple[str, int]] = set()
    for t, p in wanted:
        owner = owner_of.get((t, p), "")
        if owner in subscriptions and t in subscriptions[owner] and load[owner] < base:
            result[owner].setdefault(t, set()).add(p)
            load[owner] += 1
            kept.add((t, p))
    left: list[tuple[str, int]] = []
    for t, p in wanted:
        if (t, p) in kept:
            continue
        owner = owner_of.get((t, p), "")
        if owner in subscriptions and t in subscriptions[owner] and load[owner] == base and extra:
            result[owner].setdefault(t, set()).add(p)
            load[owner] += 1
            extra -= 1
        else:
            left.append((t, p))
    for t, p in left:
        candidates = [m for m, topics in subscriptions.items() if t in topics]
        member = min(candidates, key=lambda m: (load[m], m))
        result[member].setdefault(t, set()).add(p)
        load[member] += 1
    return result
