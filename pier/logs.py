"""The structured log format of every long-running `pier` command (broker, gateway, admin API):
key=value lines on stderr. Call once, at start-up, from the main thread."""

from __future__ import annotations

import logging
import sys

FORMAT = "ts=%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"


def configure(level: str) -> None:
    logging.basicConfig(level=level, stream=sys.stderr, format=FORMAT)
