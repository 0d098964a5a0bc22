"""Topic ids (KIP-516) on the request path: the topic a Produce v13 or Fetch v13+ names by id.

Owns: `TopicIds`, a small index from id to name over the broker's metadata cache, so a request
naming topics by id costs a dict lookup per topic, not a scan of every topic. An entry is
trusted only while the metadata still shows that name with that id (a deleted and recreated
topic gets a new id, so a stale entry is never used); a miss scans the cache once and remembers
the answer. At most `MAX_ENTRIES` ids are remembered (the index is cleared when full: a
request's ids can never grow memory without bound). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import uuid

from brokers.handlers.services import MetadataView

MAX_ENTRIES = 100_000


class TopicIds:
    def __init__(self, metadata: MetadataView | None) -> None:
        self._metadata = metadata
        self._names: dict[uuid.UUID, str] = {}

    def name(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic with `topic_id`; None for the zero id or an id nobody has."""
        metadata = self._metadata
        if topic_id is None or topic_id.int == 0 or metadata is None:
            return None
        known = self._names.get(topic_id)
        if known is not None:
            meta = metadata.topic(known)
            if meta is not None and meta.topic_id == topic_id:
                return known
            del self._names[topic_id]
        found = metadata.topic_by_id(topic_id)
        if found is None:
            return None
        if len(self._names) >= MAX_ENTRIES:
            self._names.clear()
        self._names[topic_id] = found.name
        return found.name
