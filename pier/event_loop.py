"""Which asyncio event loop the long-running commands run on: `pier broker`, `pier gateway` and
the gateway's workers (each worker is a `pier gateway` process, so it makes the same choice).

Owns: the `PIER_EVENT_LOOP` setting (`uvloop` or `asyncio`; unset: `DEFAULT`, uvloop, see
docs/design.md "The event loop"), `run` (the command's coroutine on the chosen loop, through
`asyncio.Runner(loop_factory=...)`) and `running_loop_name` (the loop actually running, for the
ready line and logs). When uvloop is wanted but cannot be imported, the command runs on asyncio's
loop after one `event=event_loop_fallback` warning. A value other than the two is a usage error
(`EventLoopChoiceError`, which the command prints as one line and exits 2).

Called once, from the main thread, before any loop exists; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

ENV = "PIER_EVENT_LOOP"
UVLOOP = "uvloop"
ASYNCIO = "asyncio"
CHOICES = (UVLOOP, ASYNCIO)
DEFAULT = UVLOOP  # measured faster and cheaper per GB (docs/design.md, "The event loop")

log = logging.getLogger("pier.event_loop")
T = TypeVar("T")


class EventLoopChoiceError(ValueError):
    """`PIER_EVENT_LOOP` names no loop this program can run."""


def chosen(environ: Mapping[str, str]) -> str:
    """The loop `PIER_EVENT_LOOP` asks for (`DEFAULT` when unset or empty)."""
    value = environ.get(ENV, "").strip().lower() or DEFAULT
    if value not in CHOICES:
        raise EventLoopChoiceError(f"{ENV}={environ.get(ENV)!r} is not one of {', '.join(CHOICES)}")
    return value


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor for `uvloop` (None, asyncio's default, if uvloop is missing,
    after one warning line); None for `asyncio`."""
    if choice != UVLOOP:
        return None
    try:
        import uvloop
    except ImportError as exc:
        log.warning(
            "event=event_loop_fallback wanted=uvloop using=asyncio error=%r detail=%r",
            str(exc),
            "pip install uvloop (a dependency in pyproject.toml), or set PIER_EVENT_LOOP=asyncio",
        )
        return None
    return uvloop.new_event_loop


def run(choice: str, main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a new loop of kind `choice` (as `asyncio.run` does)."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)


def running_loop_name() -> str:
    """`uvloop` or `asyncio`: the kind of loop running now (called from a coroutine)."""
    module = type(asyncio.get_running_loop()).__module__
    return UVLOOP if module.split(".")[0] == UVLOOP else ASYNCIO
