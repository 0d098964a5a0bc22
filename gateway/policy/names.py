"""Names and ids a tenant sends: the topic-name rule and the metered form of a client id.

Owns: `valid_topic_name` (Kafka's `Topic.validate`: 1–249 characters of `[a-zA-Z0-9._-]`, not
`.` or `..`, checked with `fullmatch` — `$` in `^…$` also matches before a final newline, which is
how `"nl\n"` got created), `topic_name_problem` (the same rule for a tenant's name, whose fleet
name `<tenant>_<name>` must fit the 249 characters too) and `usage_client_id` (a client id as
metered: Kafka's header client id may be any string of up to 32767 bytes, the usage contract takes
255 printable characters). Pure; thread-safe.
"""

from __future__ import annotations

import re
from typing import Final

from tenancy.usage import MAX_NAME, fitted_text

MAX_TOPIC_LENGTH: Final = 249
MAX_CLIENT_ID: Final = MAX_NAME  # what a usage record holds of a client id
_TOPIC: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_INSTANCE: Final = re.compile(r"[a-zA-Z0-9._-]{1,200}")


def valid_topic_name(name: object) -> bool:
    """Whether `name` is a legal Kafka topic name."""
    return isinstance(name, str) and _TOPIC.fullmatch(name) is not None and name not in (".", "..")


def valid_instance_name(name: object) -> bool:
    """Whether `name` may name an HTTP consumer instance: 1–200 of `[A-Za-z0-9._-]` (ASCII only:
    `str.isalnum` would also take any Unicode letter or digit)."""
    return isinstance(name, str) and _INSTANCE.fullmatch(name) is not None


def topic_name_problem(name: object, max_length: int = MAX_TOPIC_LENGTH) -> str | None:
    """Why a tenant may not use `name` as a topic name (Kafka's wording), or None. `max_length`
    is the tenant's: 249 minus its prefix."""
    if not isinstance(name, str) or not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > max_length:
        return f"Topic name is illegal: this tenant's topic names can be at most {max_length} characters long"
    if _TOPIC.fullmatch(name) is None:
        return (
            "Topic name is illegal, it contains a character other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )
    return None


def usage_client_id(client_id: str | None) -> str:
    """The client id usage is metered under: as sent when it is at most 255 printable characters;
    otherwise its first 255 characters with control characters, DEL and lone surrogates replaced
    by U+FFFD. The quota chain still sees the client id as sent (Kafka's rule)."""
    return fitted_text(client_id or "")
