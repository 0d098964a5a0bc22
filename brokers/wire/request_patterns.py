"""Regular expressions that requests carry, compiled as Kafka compiles them.

Owns: `compile_request_pattern` for ListTransactions v2's `transactional_id_pattern` (KIP-1152):
Kafka matches it with RE2/J against the whole id; RE2 (google-re2) is the same engine family, runs
in time linear in the input whatever the pattern (a tenant's pattern cannot stall an event loop),
and logs nothing. A pattern longer than MAX_PATTERN_CHARS or one RE2 refuses is `RefusedPattern`
(answered INVALID_REGULAR_EXPRESSION). Pure; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re2  # type: ignore[import-untyped]

MAX_PATTERN_CHARS = 1024
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@dataclass(frozen=True, slots=True)
class RefusedPattern:
    reason: str


@dataclass(frozen=True, slots=True)
class RequestPattern:
    """A compiled pattern; `matches` is a whole-string match, as Java's `Matcher.matches`."""

    _compiled: Any

    def matches(self, text: str) -> bool:
        return self._compiled.fullmatch(text) is not None


def compile_request_pattern(text: str | None) -> RequestPattern | RefusedPattern | None:
    """None for no pattern (null or empty: everything matches)."""
    if not text:
        return None
    if len(text) > MAX_PATTERN_CHARS:
        return RefusedPattern(f"longer than {MAX_PATTERN_CHARS} characters")
    try:
        return RequestPattern(re2.compile(text, _OPTIONS))
    except re2.error as exc:
        return RefusedPattern(str(exc))
