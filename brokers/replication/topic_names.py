"""Topic name rules, as Kafka's `Topic.validate`: 1–249 chars of [a-zA-Z0-9._-], not "." or "..".

Owns: `validate_topic_name`. Pure; thread-safe.
"""

from __future__ import annotations

import re

from brokers.replication.errors import InvalidTopicError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str | None) -> str:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in {".", ".."}:
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return name
