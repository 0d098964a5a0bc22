"""What a classic-protocol member of a KIP-848 consumer group (a mixed group) joined with.

Owns: `ClassicMembership`, kept per member in `ConsumerGroup.classic` and used by
`brokers.coordinator.consumer_group_migration` to serve the member through the classic APIs and to
hand it back to a classic group on a downgrade. Apart so that `consumer_group` need not import the
migration (which imports it). Pure; thread-safe (immutable).
"""

from __future__ import annotations

from dataclasses import dataclass

from brokers.coordinator.member import Protocols


@dataclass(frozen=True, slots=True)
class ClassicMembership:
    protocols: Protocols  # (name, metadata), in the member's preference order
    session_timeout_ms: int
    rebalance_timeout_ms: int

    @property
    def protocol_name(self) -> str:
        """The protocol the member is answered with (its first, as Kafka)."""
        return self.protocols[0][0]
