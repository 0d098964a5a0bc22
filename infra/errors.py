"""Errors raised by the local stack launcher (`infra.stack`).

Pure data: no I/O, safe from any thread. Every error message carries what an operator needs to act
(which process, its exit status, and the tail of its log), because these surface in CI output.
"""

from __future__ import annotations


class LaunchError(RuntimeError):
    """A process of the local stack could not be started, made ready, or configured."""


class ProcessExitedError(LaunchError):
    """The process exited before it became ready."""


class NotReadyError(LaunchError):
    """The process kept running but did not answer its readiness probe before the deadline."""
