"""One module per Kafka API the gateway serves through kio (decoded request, decoded response).

Each module declares `API_KEY`, `MIN_VERSION`, `MAX_VERSION` and `handle` (see
`gateway.kafka.filter`). `FILTERS` is the table the session dispatches on; `gateway.kafka.api_table`
derives what the gateway advertises from it. Produce and Fetch are not here: they are rewritten on
raw bytes (`gateway.kafka.produce`, `gateway.kafka.fetch`). An API absent from this table is
never forwarded.
"""

from __future__ import annotations

from gateway.kafka.filter import FilterModule
from gateway.kafka.filters import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    end_txn,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    sync_group,
    txn_offset_commit,
)

_MODULES: tuple[FilterModule, ...] = (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    end_txn,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    sync_group,
    txn_offset_commit,
)
FILTERS: dict[int, FilterModule] = {module.API_KEY: module for module in _MODULES}
