"""Kafka error codes: the numbers every response carries, re-exported from kio's generated enum.

Owns: `ErrorCode` for the whole project, so nothing else imports kio's error module directly.
Pure; thread-safe.
"""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode"]
