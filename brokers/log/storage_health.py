"""Whether a partition log may still touch its files (Kafka's offline log dir, per partition).

Owns: the online → offline transition after a storage failure the log cannot undo, the one
structured error line it logs, and the LogOfflineError every later operation gets. There is no
way back but a restart: after a failed fsync or a half-done truncation nothing written since
the last good fsync can be trusted, and only recovery (which re-validates every batch past the
recovery point) can say what the files hold. Messages that reach clients name the error only
(`brief`: "No space left on device"), never a server path; the log line has the whole error.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from brokers.log.errors import LogOfflineError

log = logging.getLogger(__name__)


def brief(exc: BaseException) -> str:
    """The error without file names, for messages that reach clients."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


class StorageHealth:
    def __init__(self, topic: str, partition: int) -> None:
        self._name = f"{topic}-{partition}"
        self.reason: str | None = None  # why the log went offline; None while online

    @property
    def offline(self) -> bool:
        return self.reason is not None

    def check(self) -> None:
        """Raise LogOfflineError once offline."""
        if self.reason is not None:
            raise LogOfflineError(f"log {self._name} is offline until restart: {self.reason}")

    def fail(self, reason: str, log_end_offset: int, cause: BaseException) -> LogOfflineError:
        """Go offline (logged once); returns the error for the caller to raise."""
        if self.reason is None:
            self.reason = reason
            log.error(
                "event=log_offline partition=%s log_end_offset=%d reason=%r error=%r",
                self._name, log_end_offset, reason, str(cause),
            )  # fmt: skip
        return LogOfflineError(f"log {self._name} went offline: {reason}")

    @contextmanager
    def offline_on_failure(self, action: str, log_end_offset: int) -> Iterator[None]:
        """An OSError inside leaves the files in an unknown state: go offline and raise."""
        try:
            yield
        except OSError as exc:
            raise self.fail(f"{action} failed ({brief(exc)})", log_end_offset, exc) from exc
