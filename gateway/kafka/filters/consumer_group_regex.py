"""A tenant's KIP-848 SubscribedTopicRegex, rewritten into the fleet namespace and back.

Owns: `to_fleet(namespace, regex)` and `to_tenant(namespace, fleet_regex)`. The tenant's regex R is
first compiled alone with RE2 (refused, INVALID_REGULAR_EXPRESSION, when it does not compile or
is too long); the brokers then get `<escaped prefix>(?:R')`, where R' is R with each start
anchor (`^`, `\\A`, outside character classes and `\\Q…\\E` quotes) replaced by an empty group
marker, since the tenant's name starts after the prefix. Because R' compiles alone its
parentheses balance, so the prefix stays a literal at the top level of the whole regex: the
brokers (RE2, whole-name match) can only ever match names carrying this tenant's prefix, never
another tenant's topic nor an internal `__` one. A quote left open at the end of R (`\\Qab`) is
closed with `\\E` before the group is; anything else that does not compile wrapped is refused.
Difference (docs/compatibility.md): a start anchor in the middle of a regex (`a^b`, which Kafka
never matches: topic names hold no line breaks) matches there as if it were absent.

`to_tenant` turns the brokers' copy (ConsumerGroupDescribe) back into the tenant's regex, or
None when it does not carry this tenant's wrapping (fail closed). Pure; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

import re2  # type: ignore[import-untyped]

from brokers.wire.request_patterns import MAX_PATTERN_CHARS
from gateway.kafka.namespace import TenantNamespace

START_MARK = "(?-U:)"  # stands for a `^`: matches the empty string, as the anchor after the prefix
BEGIN_MARK = "(?U:)"  # stands for a `\A`
OPEN_QUOTE_CLOSE = "\\E"
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@dataclass(frozen=True, slots=True)
class RefusedRegex:
    reason: str


def to_fleet(namespace: TenantNamespace, regex: str) -> str | RefusedRegex:
    """The regex to send the brokers for a tenant's non-empty regex, or why it is refused."""
    if len(regex) > MAX_PATTERN_CHARS:
        return RefusedRegex(f"SubscribedTopicRegex is longer than {MAX_PATTERN_CHARS} characters")
    invalid = RefusedRegex("SubscribedTopicRegex is not a valid regular expression")
    if not _compiles(regex):
        return invalid
    inner = _unanchored(regex)
    head = _head(namespace)
    for candidate in (head + inner + ")", head + inner + OPEN_QUOTE_CLOSE + ")"):
        if _compiles(inner) and _compiles(candidate):
            if len(candidate) > MAX_PATTERN_CHARS:
                limit = MAX_PATTERN_CHARS - len(head) - 1
                return RefusedRegex(
                    f"SubscribedTopicRegex is longer than {limit} characters in this namespace"
                )
            return candidate
    return invalid


def to_tenant(namespace: TenantNamespace, fleet_regex: str | None) -> str | None:
    head = _head(namespace)
    if not fleet_regex or not fleet_regex.startswith(head) or not fleet_regex.endswith(")"):
        return None
    inner = fleet_regex[len(head) : -1]
    return inner.replace(START_MARK, "^").replace(BEGIN_MARK, "\\A")


def _head(namespace: TenantNamespace) -> str:
    return str(re2.escape(namespace.prefix)) + "(?:"


def _compiles(regex: str) -> bool:
    """RE2 compiles it, whatever its length (the callers check lengths)."""
    try:
        re2.compile(regex, _OPTIONS)
    except re2.error:
        return False
    return True


def _unanchored(regex: str) -> str:
    """`regex` with `^` and `\\A` outside classes and quotes replaced by their marks."""
    out: list[str] = []
    i, n = 0, len(regex)
    while i < n:
        c = regex[i]
        if c == "\\" and i + 1 < n:
            nxt = regex[i + 1]
            if nxt == "Q":
                end = regex.find("\\E", i + 2)
                stop = n if end < 0 else end + 2
                out.append(regex[i:stop])
                i = stop
                continue
            out.append(BEGIN_MARK if nxt == "A" else regex[i : i + 2])
            i += 2
        elif c == "[":
            stop = _class_end(regex, i)
            out.append(regex[i:stop])
            i = stop
        else:
            out.append(START_MARK if c == "^" else c)
            i += 1
    return "".join(out)


def _class_end(regex: str, start: int) -> int:
    """The index after the character class opening at `start` (RE2's rules: a `]` first, after
    an optional `^`, is a literal; `[:name:]` is a POSIX class; `\\x` escapes one character)."""
    i, n = start + 1, len(regex)
    if i < n and regex[i] == "^":
        i += 1
    if i < n and regex[i] == "]":
        i += 1
    while i < n:
        if regex[i] == "\\":
            i += 2
        elif regex.startswith("[:", i):
            close = regex.find(":]", i + 2)
            i = n if close < 0 else close + 2
        elif regex[i] == "]":
            return i + 1
        else:
            i += 1
    return n
