"""Process limits a server command raises at start.

Owns: `raise_open_file_limit` — `pier broker` and `pier gateway` (the supervisor, so every worker
inherits it) raise their soft open-file limit to the hard one, as the JVM raises Kafka's
(brokers/common/descriptors.py `raise_soft_limit`), and log it once. Called before the event loop
starts; not thread-safe.
"""

from __future__ import annotations

import logging

from brokers.common.descriptors import raise_soft_limit


def raise_open_file_limit() -> None:
    """The soft open-file limit raised to the hard one, logged when it changed."""
    raised = raise_soft_limit()
    if raised is not None:
        logging.getLogger("pier").info(
            "event=open_file_limit_raised soft_was=%d soft=%d", raised[0], raised[1]
        )
