"""The admin client: one object over a `Cluster` for topic, config, offset and group operations.

Owns: `Admin`, a thin facade (each method delegates to the module that implements it:
`topics`, `offsets`, `groups`, `group_offsets`, `leadership`) so tools hold one handle and close
one thing.
Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from brokers.client import group_offsets, groups, leadership, offsets, topics
from brokers.client.cluster import Cluster
from brokers.client.config import ClientConfig
from brokers.client.errors import ClientError
from brokers.client.group_offsets import CommittedOffset
from brokers.client.groups import GroupDescription, GroupListing
from brokers.client.leadership import PartitionReassignment
from brokers.client.metadata import ClusterMetadata, TopicPartition
from brokers.client.offsets import ListedOffset
from brokers.client.topics import ConfigEntry, NewTopic


class Admin:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @classmethod
    def for_bootstrap(
        cls, bootstrap: str | Sequence[str], config: ClientConfig | None = None
    ) -> Admin:
        """No I/O yet: connections open on first use."""
        return cls(Cluster(bootstrap, config))

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.cluster.close()

    async def describe_cluster(self) -> ClusterMetadata:
        return await self.cluster.metadata(refresh=True)

    async def create_topics(
        self, new: Sequence[NewTopic], *, timeout_s: float = 30.0
    ) -> dict[str, ClientError | None]:
        return await topics.create_topics(self.cluster, new, timeout_s=timeout_s)

    async def delete_topics(
        self, names: Sequence[str], *, timeout_s: float = 30.0
    ) -> dict[str, ClientError | None]:
        return await topics.delete_topics(self.cluster, names, timeout_s=timeout_s)

    async def describe_configs(
        self, resource_type: int, name: str, keys: Sequence[str] | None = None
    ) -> dict[str, ConfigEntry]:
        return await topics.describe_configs(self.cluster, resource_type, name, keys)

    async def list_offsets(
        self, wanted: Mapping[TopicPartition, int], *, read_committed: bool = False
    ) -> dict[TopicPartition, ListedOffset]:
        return await offsets.list_offsets(self.cluster, wanted, read_committed=read_committed)

    async def list_groups(self, states: Collection[str] = ()) -> list[GroupListing]:
        return await groups.list_groups(self.cluster, states)

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        return await groups.describe_groups(self.cluster, group_ids)

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ClientError | None]:
        return await groups.delete_groups(self.cluster, group_ids)

    async def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        return await group_offsets.fetch_offsets(self.cluster, group_id, partitions)

    async def commit_offsets(
        self, group_id: str, new: Mapping[TopicPartition, int], *, metadata: str = ""
    ) -> None:
        """A simple (generation -1) commit: only for groups without active members."""
        await group_offsets.commit_offsets(self.cluster, group_id, new, metadata=metadata)

    async def elect_leaders(
        self,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        unclean: bool = False,
        timeout_s: float = 30.0,
    ) -> dict[TopicPartition, ClientError | None]:
        """Preferred (or unclean) leader election at the controller; None = every partition."""
        return await leadership.elect_leaders(
            self.cluster, partitions, unclean=unclean, timeout_s=timeout_s
        )

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None], *, timeout_s: float = 30.0
    ) -> dict[TopicPartition, ClientError | None]:
        """Start (target replicas) or cancel (None) partition reassignments at the controller."""
        return await leadership.alter_partition_reassignments(
            self.cluster, targets, timeout_s=timeout_s
        )

    async def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        return await leadership.list_partition_reassignments(self.cluster, partitions)
