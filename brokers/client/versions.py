"""The API versions this client speaks, and negotiation against what a broker advertises.

Owns: `ApiKey` (the APIs the client uses), `CLIENT_VERSIONS` (for each, the range of versions the
client's request builders and response readers handle; unit tests build and read every one), and
`negotiate`, which picks per API the highest version both sides serve, as Kafka's
`ApiVersions.latestUsableVersion` does. Pure; thread-safe.

Ceilings are deliberate: Fetch stops at 12, Produce at 11, Metadata at 12 and the offset APIs
before their KIP-848/KIP-516 topic-id versions, whose request shapes this client does not build.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from brokers.client.errors import UnsupportedVersionError


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    WRITE_TXN_MARKERS = 27
    DESCRIBE_CONFIGS = 32
    DESCRIBE_LOG_DIRS = 35
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


_KNOWN = frozenset(int(key) for key in ApiKey)

CLIENT_VERSIONS: Mapping[int, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (3, 11),  # only magic v2 batches exist from v3
        ApiKey.FETCH: (4, 12),  # v13 names topics by id
        ApiKey.LIST_OFFSETS: (1, 9),
        ApiKey.METADATA: (1, 12),
        ApiKey.OFFSET_COMMIT: (2, 9),
        ApiKey.OFFSET_FETCH: (
            2,
            9,
        ),  # v2 is the first to fetch all of a group's offsets (null topics)
        ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.DESCRIBE_GROUPS: (0, 5),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.WRITE_TXN_MARKERS: (1, 2),  # v0 is gone from Kafka 4 (and kio)
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.DESCRIBE_LOG_DIRS: (1, 4),  # v0 is gone from Kafka (and kio)
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.ELECT_LEADERS: (0, 2),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 2),
    }
)


def negotiate(
    broker_ranges: Iterable[tuple[int, int, int]],
    client_ranges: Mapping[int, tuple[int, int]] = CLIENT_VERSIONS,
) -> dict[int, int]:
    """(api_key, min, max) triples from ApiVersions → {api_key: version to use}.

    APIs the broker does not advertise, or whose ranges do not overlap ours, are left out; asking
    for one of them later raises `UnsupportedVersionError` (see `version_for`).
    """
    chosen: dict[int, int] = {}
    for api_key, low, high in broker_ranges:
        ours = client_ranges.get(api_key)  # IntEnum keys hash and compare as ints
        if ours is None:
            continue
        top = min(high, ours[1])
        if top >= max(low, ours[0]):
            chosen[api_key] = top
    return chosen


def version_for(chosen: Mapping[int, int], api_key: int) -> int:
    try:
        return chosen[api_key]
    except KeyError:
        name = ApiKey(api_key).name if api_key in _KNOWN else str(api_key)
        raise UnsupportedVersionError(f"the broker serves no version of {name} we speak") from None
