"""Value types of cluster state shared by the codecs, the context and the state machines.

Owns: `LeaderAndIsr` (the content of a partition's `state` znode plus its znode
version), `ReplicaAssignment` (KIP-455: replicas, adding, removing) and `BrokerEndpoint`; the
partition key `TopicPartition` is the client's, re-exported; `shared`, which interns equal
immutable values (broker-id tuples, assignments, states: thousands of partitions hold a handful
of distinct ones; at most `SHARED_MAX` are kept, others stay unshared). Immutable frozen
dataclasses; thread-safe (`shared`'s table: under the GIL, a lost race only costs sharing).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypeVar

from brokers.client.metadata import TopicPartition

__all__ = [
    "INITIAL_CONTROLLER_EPOCH",
    "INITIAL_LEADER_EPOCH",
    "NO_LEADER",
    "BrokerEndpoint",
    "LeaderAndIsr",
    "ReplicaAssignment",
    "TopicPartition",
    "shared",
]

NO_LEADER = -1
"""Kafka's `LeaderAndIsr.NoLeader`: the partition has no leader (offline)."""

SHARED_MAX = 4096
"""Distinct values `shared` interns; past it a value is returned as it is (no unbounded table)."""
_shared: dict[object, object] = {}
_V = TypeVar("_V")


def shared(value: _V) -> _V:
    """The interned instance equal to `value` (hashable and immutable: a tuple of ints, a frozen
    state). The controller's context holds one assignment and one state per partition; 10,000
    partitions over three brokers have a few distinct ones, and a copy each cost ~150 bytes."""
    found = _shared.get(value)
    if found is not None:
        return found  # type: ignore[return-value]  # equal to value, so of its type
    if len(_shared) < SHARED_MAX:
        _shared[value] = value
    return value


INITIAL_LEADER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH = 0
"""`/controller_epoch` is created holding this; the first elected controller then has epoch 1."""


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leadership as stored in `/brokers/topics/<t>/partitions/<p>/state`.

    `zk_version` is the znode version it was read at (-1 when not read from ZooKeeper); writes are
    conditional on it, so two controllers (or a controller and a leader shrinking its ISR) never
    overwrite each other silently.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def next_epoch(self, leader: int, isr: tuple[int, ...], controller_epoch: int) -> LeaderAndIsr:
        """The state after a leader/ISR change made by the controller: the leader epoch bumps."""
        return replace(
            self,
            leader=leader,
            leader_epoch=self.leader_epoch + 1,
            isr=isr,
            controller_epoch=controller_epoch,
        )


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas; `adding`/`removing` are non-empty only during a reassignment (KIP-455).

    During a reassignment `replicas` is the union: target replicas first, then the leaving ones.
    The first replica is the preferred leader.
    """

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = field(default=())
    removing: tuple[int, ...] = field(default=())

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where the partition ends up once a reassignment completes."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One advertised listener: `PLAINTEXT://host:port` in the registration znode."""

    listener: str
    host: str
    port: int

    @property
    def connection_string(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"
