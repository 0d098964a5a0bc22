"""How a partition leader records an ISR change: the `IsrWriter` port.

Owns: the `IsrWriter` protocol only. In ZooKeeper mode the leader itself writes the new ISR to
`/brokers/topics/<t>/partitions/<p>/state` with a conditional update on the znode version
(Kafka's pre-KIP-497 `Partition.updateIsr` through `zkClient.conditionalUpdatePath`); the
controller engineer implements it over ZooKeeper, tests use an in-memory fake. With no writer
(the standalone broker) the ISR never changes. Implementations run on the broker's event loop.
"""

from __future__ import annotations

from typing import Protocol


class IsrWriter(Protocol):
    async def write_isr(
        self,
        topic: str,
        partition: int,
        leader_epoch: int,
        isr: list[int],
        zk_version: int,
        controller_epoch: int,
    ) -> int | None:
        """Write `isr` if the partition state znode is still at `zk_version`: the new version,
        or None on a version conflict (the controller changed the state meanwhile; the leader
        then waits for the controller's LeaderAndIsr). Other failures raise."""
        ...
