"""The metadata cache's topic table: found by id and by prefix without a scan, and right after
any sequence of writes through any dict method (hypothesis against a plain dict's scan)."""

from __future__ import annotations

import copy
import pickle
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.handlers import metadata as metadata_handler
from brokers.replication.metadata_cache import (
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
    TopicTable,
)

NAMES = ["a", "a_x", "a.x", "a_y", "ab", "b", "b_a", "bolt_orders", "bolt.orders", "bolt", ""]
IDS = [uuid.UUID(int=i + 1) for i in range(6)]
GENERATIONS = range(3)  # a name deleted and recreated gets a new id; no two names share one
PREFIXES = ["", "a", "a_", "b", "bolt_", "acme_", "z", "ab"]


def _topic(name: str, topic_id: uuid.UUID) -> TopicMetadata:
    return TopicMetadata(name, topic_id, {})


def _id(name: str, generation: int) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_OID, f"{name}/{generation}")


_writes = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(NAMES), st.sampled_from(GENERATIONS)),
    st.tuples(st.just("del"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("pop"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("setdefault"), st.sampled_from(NAMES), st.sampled_from(GENERATIONS)),
    st.tuples(st.just("update"), st.sampled_from(NAMES), st.sampled_from(GENERATIONS)),
    st.tuples(st.just("ior"), st.sampled_from(NAMES), st.sampled_from(GENERATIONS)),
    st.tuples(st.just("popitem"), st.none(), st.none()),
    st.tuples(st.just("clear"), st.none(), st.none()),
)


def _apply(table: dict[str, TopicMetadata], op: str, name: Any, generation: Any) -> None:
    topic_id = None if generation is None else _id(name, generation)
    if op == "set":
        table[name] = _topic(name, topic_id)
    elif op == "del" and name in table:
        del table[name]
    elif op == "pop":
        table.pop(name, None)
    elif op == "setdefault":
        table.setdefault(name, _topic(name, topic_id))
    elif op == "update":
        table.update({name: _topic(name, topic_id)})
    elif op == "ior":
        table |= {name: _topic(name, topic_id)}
    elif op == "popitem" and table:
        table.popitem()
    elif op == "clear":
        table.clear()


@settings(max_examples=300, deadline=None)
@given(st.lists(_writes, max_size=40))
def test_the_indexes_agree_with_a_scan_after_any_writes(writes: list[Any]) -> None:
    table = TopicTable()
    model: dict[str, TopicMetadata] = {}
    for op, name, generation in writes:
        _apply(table, op, name, generation)
        _apply(model, op, name, generation)
    assert dict(table) == model
    for topic_id in (_id(n, g) for n in NAMES for g in GENERATIONS):
        holder = next((t for t in model.values() if t.topic_id == topic_id), None)
        assert table.by_id(topic_id) == holder
    for prefix in PREFIXES:
        expected = sorted(n for n in model if n.startswith(prefix))
        assert [t.name for t in table.with_prefix(prefix)] == expected
    for name in [*NAMES, "a.y"]:
        alike = {n for n in model if n.replace(".", "_") == name.replace(".", "_")}
        found = table.name_like(name)
        assert (found is None) == (not alike) and (found is None or found in alike)


def test_a_cache_given_a_plain_dict_indexes_it() -> None:
    orders = _topic("acme_orders", IDS[0])
    cache = MetadataCache("c", 0, topics={"acme_orders": orders})  # type: ignore[arg-type]
    assert isinstance(cache.topics, TopicTable)
    assert cache.topic_by_id(IDS[0]) is orders
    assert list(cache.topics_with_prefix("acme_")) == [orders]


def test_a_recreated_topic_is_found_by_its_new_id_only() -> None:
    cache = MetadataCache("c", 0)
    cache.topics["t"] = _topic("t", IDS[0])
    cache.topics["t"] = _topic("t", IDS[1])
    assert cache.topic_by_id(IDS[0]) is None
    assert cache.topic_by_id(IDS[1]) is cache.topics["t"]
    del cache.topics["t"]
    assert cache.topic_by_id(IDS[1]) is None
    assert list(cache.topics_with_prefix("")) == []


def test_lookups_by_id_and_prefix_scan_no_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 20,000 topics a look-up by id and a tenant's prefix touch only what they find
    (before: every topic, 0.8 ms each at 10,000 topics, per id a request named)."""
    cache = MetadataCache("c", 0)
    for i in range(20_000):
        cache.topics[f"t{i:05d}_x"] = _topic(f"t{i:05d}_x", uuid.UUID(int=i + 1))

    def no_scan(_self: Any) -> Any:
        raise AssertionError("a look-up walked every topic")

    monkeypatch.setattr(TopicTable, "values", no_scan)
    monkeypatch.setattr(TopicTable, "items", no_scan)
    monkeypatch.setattr(TopicTable, "__iter__", no_scan)
    assert cache.topic_by_id(uuid.UUID(int=12_346)) is cache.topics["t12345_x"]
    assert [t.name for t in cache.topics_with_prefix("t1234")] == [f"t1234{d}_x" for d in range(10)]
    assert not hasattr(metadata_handler, "_with_prefix")


def test_the_replica_load_is_counted_once_between_writes() -> None:
    """CreateTopics asks it for every topic of a request (a validate-only request of 100 topics
    walked every replica of the fleet 100 times): the count is kept until the cache changes."""
    cache = MetadataCache("c", 0)
    partition = PartitionMetadata(0, 1, 0, [1, 2], [1, 2])
    cache.topics["a"] = TopicMetadata("a", IDS[0], {0: partition})
    first = cache.replica_load()
    assert first == {1: 1, 2: 1} and cache.replica_load() is first
    cache.topics["b"] = TopicMetadata("b", IDS[1], {0: partition, 1: partition})
    assert cache.replica_load() == {1: 3, 2: 3}
    cache.topics["b"].partitions.pop(1)
    cache.partition_changes += 1  # as UpdateMetadata does when a partition goes
    assert cache.replica_load() == {1: 2, 2: 2}


def test_a_copied_or_pickled_table_keeps_indexes_of_its_own() -> None:
    table = TopicTable({"b": _topic("b", IDS[1]), "a": _topic("a", IDS[0])})
    shallow = copy.copy(table)
    shallow["z"] = _topic("z", IDS[2])
    assert list(table.sorted_names()) == ["a", "b"], "the original's index untouched"
    for other in (shallow, copy.deepcopy(table), pickle.loads(pickle.dumps(table))):
        assert isinstance(other, TopicTable)
        assert other.by_id(IDS[0]) == table["a"]
        assert [t.name for t in other.with_prefix("")][:2] == ["a", "b"]
    with pytest.raises(KeyError):
        TopicTable().popitem()
