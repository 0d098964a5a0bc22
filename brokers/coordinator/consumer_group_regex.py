"""KIP-848 regex subscriptions (ConsumerGroupHeartbeat's `SubscribedTopicRegex`) of consumer groups.

Owns: `check_regex` (the handler's checks, answered INVALID_REGULAR_EXPRESSION as Kafka does: RE2
syntax, at most MAX_REGEX_CHARS characters, at most MAX_GROUP_REGEXES distinct regexes in one
group) and `GroupRegexes`, one per consumer group: each regex its members subscribe with,
resolved to the topic names it matches whole (RE2, as Kafka's RE2/J `matches`; internal topics
never). A regex new to the group is resolved at once; all of them are resolved again at the
first heartbeat at least `refresh interval` after the last resolution, where the interval is
min(REGEX_MIN_REFRESH_MS, `group.consumer.regex.refresh.interval.ms`): a topic created (or
deleted) that a regex matches joins (leaves) the subscription within that interval plus one
heartbeat interval. Kafka 4.1 resolves again 10 s after a metadata change, or after the
refresh interval (default 10 min) without one. A resolution matches each regex (RE2: linear in
the name whatever the regex) only against the names inside its PossibleMatchRange, found by
bisection in the sorted names (`TopicIndex`): a namespaced regex from the gateway visits its
tenant's topics only (20 such regexes over 10,000 names: ~15x less than a full scan). Kafka
resolves on a background thread; here it runs on the event loop, bounded by that and by
MAX_GROUP_REGEXES. No Python on the per-record path.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import bisect
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]

from brokers.common.internal_topics import is_internal
from brokers.wire.request_patterns import MAX_PATTERN_CHARS

log = logging.getLogger("pier.coordinator.consumer")
MAX_REGEX_CHARS = MAX_PATTERN_CHARS
MAX_GROUP_REGEXES = 100
REGEX_MIN_REFRESH_MS = 10_000  # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
RANGE_PREFIX_BYTES = 256  # PossibleMatchRange's look-ahead: longer than any topic name
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


def no_topics() -> Iterable[str]:
    return ()


@functools.lru_cache(maxsize=1024)
def compiled(regex: str) -> Any | None:
    """The compiled RE2 regex, or None when RE2 refuses it (or it is too long)."""
    if not regex or len(regex) > MAX_REGEX_CHARS:
        return None
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error:
        return None


def check_regex(regex: str, group_regexes: Iterable[str]) -> str | None:
    """Why `regex` is refused (INVALID_REGULAR_EXPRESSION), or None; `group_regexes` are the
    distinct regexes the group's members already subscribe with."""
    if len(regex) > MAX_REGEX_CHARS:
        return f"SubscribedTopicRegex is longer than {MAX_REGEX_CHARS} characters"
    if compiled(regex) is None:
        return f"SubscribedTopicRegex {regex!r} is not a valid regular expression"
    others = set(group_regexes)
    if regex not in others and len(others) >= MAX_GROUP_REGEXES:
        return f"the group already subscribes with {MAX_GROUP_REGEXES} distinct regexes"
    return None


@dataclass(frozen=True, slots=True)
class SortedTopicNames:
    """Topic names already in order, kept so by their owner (the metadata cache's
    `TopicTable`): a resolution bisects them instead of sorting every name of the fleet
    (100,000 topics: 20 ms a resolution, each time a member brought a new regex). Python orders
    strings by code point, as UTF-8 orders their bytes."""

    names: Sequence[str]


TopicNames = Callable[[], Iterable[str] | SortedTopicNames]


class TopicIndex:
    """Topic names in order, so a regex is matched only against the names inside RE2's
    PossibleMatchRange (its literal prefix: through the gateway, the tenant's names only)
    instead of every name in the fleet."""

    def __init__(self, names: Iterable[str] | SortedTopicNames) -> None:
        if isinstance(names, SortedTopicNames):
            self.names = names.names  # internal names left out as they are met
        else:
            self.names = sorted(n for n in names if not is_internal(n))

    def candidates(self, pattern: Any) -> Iterator[str]:
        names = self.names
        try:
            low, high = pattern.possiblematchrange(RANGE_PREFIX_BYTES)
        except (re2.error, ValueError):
            start, end = 0, len(names)
        else:
            start = bisect.bisect_left(names, low, key=str.encode)
            end = bisect.bisect_right(names, high, lo=start, key=str.encode)
        return (names[i] for i in range(start, end) if not is_internal(names[i]))


def resolve(regex: str, names: Iterable[str] | SortedTopicNames | TopicIndex) -> frozenset[str]:
    """The names `regex` matches whole (internal topics never)."""
    pattern = compiled(regex)
    if pattern is None:
        return frozenset()
    index = names if isinstance(names, TopicIndex) else TopicIndex(names)
    return frozenset(n for n in index.candidates(pattern) if pattern.fullmatch(n) is not None)


@dataclass(slots=True)
class GroupRegexes:
    resolved: dict[str, frozenset[str]] = field(default_factory=dict)
    resolved_at: float | None = None  # monotonic seconds of the last full resolution

    def topics(self, regex: str) -> frozenset[str]:
        return self.resolved.get(regex, frozenset()) if regex else frozenset()

    def refresh(self, in_use: set[str], names: TopicNames, now: float, interval_ms: int) -> bool:
        """Resolve new regexes (all when due); True when a resolved topic set changed."""
        for gone in set(self.resolved) - in_use:
            del self.resolved[gone]
        interval_s = min(REGEX_MIN_REFRESH_MS, interval_ms) / 1000
        due = self.resolved_at is None or now - self.resolved_at >= interval_s
        todo = in_use if due else in_use - set(self.resolved)
        if not todo:
            return False
        listed = TopicIndex(names())
        if due:
            self.resolved_at = now
        changed = False
        for regex in sorted(todo):
            topics = resolve(regex, listed)
            if topics != self.resolved.get(regex):
                changed = True
                self.resolved[regex] = topics
        return changed


def effective(names: frozenset[str], regex: str, regexes: GroupRegexes) -> frozenset[str]:
    """A member's subscription: its topic names and what its regex resolves to."""
    return names | regexes.topics(regex) if regex else names


def in_use(regex_of: Mapping[str, str]) -> set[str]:
    return {r for r in regex_of.values() if r}
