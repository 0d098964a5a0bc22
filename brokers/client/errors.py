"""Errors of the project's Kafka client.

Owns: every exception `brokers.client` raises. Two families:
- connection-level (`BrokerConnectionError` and subclasses): the connection is unusable and has
  been closed; every request in flight on it fails with the same error. Retriable by reconnecting.
- answer-level (`BrokerResponseError`): the broker answered with a non-zero error code. Unlike the
  broker's own domain errors (which never carry codes: handlers map them), a client error *is* the
  code the broker sent, so it keeps it, with Kafka's retriable flag deciding whether to retry.
Pure; thread-safe.
"""

from __future__ import annotations

from brokers.wire.errors import ErrorCode


class ClientError(Exception):
    """Base of everything the client raises."""

    retriable: bool = False


class ClientConfigError(ClientError, ValueError):
    """A client setting out of its range."""


class InvalidArgumentError(ClientError, ValueError):
    """An argument the client refuses before asking any broker (e.g. a non-numeric broker id)."""


class BrokerConnectionError(ClientError):
    """The TCP connection failed, closed, or was closed by us after a protocol violation."""

    retriable = True


class ConnectionClosedError(BrokerConnectionError):
    """The connection is closed (by the peer, by `close()`, or after an earlier failure)."""


class ProtocolViolationError(BrokerConnectionError):
    """The broker's bytes break the protocol: unknown or out-of-order correlation id, a frame
    that does not decode as the response it answers, a bad size prefix."""


class ResponseTooLargeError(ProtocolViolationError):
    """A response frame larger than the client's `max_response_bytes`, refused before reading."""


class RequestTimeoutError(BrokerConnectionError):
    """No response within the request timeout. As Kafka's NetworkClient does, the connection is
    closed: a late answer would otherwise be matched against the wrong request."""


class UnsupportedVersionError(ClientError):
    """The broker serves no version of an API that this client can speak."""


class UnknownTopicError(ClientError):
    """Metadata says the topic (or the partition) does not exist."""


class NoLeaderError(ClientError):
    """The partition has no leader yet, or the leader is not in the broker list."""

    retriable = True


class UnexpectedAnswerError(ClientError):
    """An answer that decodes but is not about what was asked (entries missing or repeated), as
    Kafka's Admin handlers refuse such answers. Not retriable: the broker would answer alike."""


class OffsetResetError(ClientError):
    """An offset reset that cannot be planned (e.g. shifting a partition with no committed offset)."""


class BrokerResponseError(ClientError):
    """The broker answered with an error code (`code`), for `context` (a topic-partition, a
    group, a resource name)."""

    def __init__(self, code: ErrorCode, context: str = "", message: str | None = None) -> None:
        self.code = code
        self.context = context
        self.retriable = code.retriable
        detail = f": {message}" if message else ""
        where = f" ({context})" if context else ""
        super().__init__(f"{code.name.upper()}{where}{detail}")


def check(code: int, context: str = "", message: str | None = None) -> None:
    """Raise `BrokerResponseError` for a non-zero error code."""
    if code != ErrorCode.none:
        raise BrokerResponseError(ErrorCode(code), context, message)
