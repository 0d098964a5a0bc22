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
refresh interval (default 10 min) without one. A resolution costs one RE2 full match per topic
name per regex (linear in the name whatever the regex); no Python on the per-record path.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from brokers.common.internal_topics import is_internal
from brokers.wire.request_patterns import (
    MAX_PATTERN_CHARS,
    RefusedPattern,
    RequestPattern,
    compile_request_pattern,
)

log = logging.getLogger("pier.coordinator.consumer")
MAX_REGEX_CHARS = MAX_PATTERN_CHARS
MAX_GROUP_REGEXES = 100
REGEX_MIN_REFRESH_MS = 10_000  # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
TopicNames = Callable[[], Iterable[str]]


def no_topics() -> Iterable[str]:
    return ()


@functools.lru_cache(maxsize=1024)
def compiled(regex: str) -> RequestPattern | RefusedPattern:
    """The compiled regex (callers checked it with `check_regex`)."""
    result = compile_request_pattern(regex)
    assert result is not None  # an empty regex is no regex and is never compiled
    return result


def check_regex(regex: str, group_regexes: Iterable[str]) -> str | None:
    """Why `regex` is refused (INVALID_REGULAR_EXPRESSION), or None; `group_regexes` are the
    distinct regexes the group's members already subscribe with."""
    if len(regex) > MAX_REGEX_CHARS:
        return f"SubscribedTopicRegex is longer than {MAX_REGEX_CHARS} characters"
    pattern = compiled(regex)
    if isinstance(pattern, RefusedPattern):
        return f"SubscribedTopicRegex {regex!r} is not a valid regular expression"
    others = set(group_regexes)
    if regex not in others and len(others) >= MAX_GROUP_REGEXES:
        return f"the group already subscribes with {MAX_GROUP_REGEXES} distinct regexes"
    return None


def resolve(regex: str, names: Iterable[str]) -> frozenset[str]:
    pattern = compiled(regex)
    if isinstance(pattern, RefusedPattern):
        return frozenset()
    return frozenset(n for n in names if not is_internal(n) and pattern.matches(n))


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
        listed = list(names())
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
