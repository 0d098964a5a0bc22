"""The controller's assignments keep each topic's partitions (`AssignmentTable`): a topic's
deletion or growth costs its own partitions, and the index agrees with a scan after any writes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.controller.context import AssignmentTable, ControllerContext
from brokers.controller.state import ReplicaAssignment, TopicPartition

pytestmark = pytest.mark.unit
TPS = [TopicPartition(t, p) for t in ("a", "b", "ab") for p in range(3)]
ONE, TWO = ReplicaAssignment((1,)), ReplicaAssignment((1, 2))

_writes = st.lists(
    st.tuples(
        st.sampled_from(["set", "del", "pop", "setdefault", "update", "clear"]),
        st.sampled_from(TPS),
        st.sampled_from([ONE, TWO]),
    ),
    max_size=40,
)


def _apply(table: dict[TopicPartition, ReplicaAssignment], op: str, tp: Any, value: Any) -> None:
    if op == "set":
        table[tp] = value
    elif op == "del" and tp in table:
        del table[tp]
    elif op == "pop":
        table.pop(tp, None)
    elif op == "setdefault":
        table.setdefault(tp, value)
    elif op == "update":
        table.update({tp: value})
    elif op == "clear":
        table.clear()


@settings(max_examples=300, deadline=None)
@given(_writes)
def test_each_topic_s_partitions_agree_with_a_scan(writes: list[Any]) -> None:
    table = AssignmentTable()
    model: dict[TopicPartition, ReplicaAssignment] = {}
    for op, tp, value in writes:
        _apply(table, op, tp, value)
        _apply(model, op, tp, value)
    assert dict(table) == model
    for topic in ("a", "b", "ab", "c"):
        assert table.of_topic(topic) == sorted(tp for tp in model if tp.topic == topic)


def test_removing_a_topic_walks_its_own_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    context = ControllerContext()
    for topic in ("keep", "gone"):
        context.add_topic(topic, uuid.uuid4(), {p: ONE for p in range(1_000)})

    def no_walk(_self: Any) -> Any:
        raise AssertionError("walked every partition of the fleet")

    monkeypatch.setattr(AssignmentTable, "__iter__", no_walk)
    assert len(context.partitions_of("gone")) == 1_000
    context.remove_topic("gone")
    monkeypatch.undo()
    assert {tp.topic for tp in context.assignments} == {"keep"}


def test_a_context_given_a_plain_dict_indexes_it() -> None:
    context = ControllerContext(assignments={TopicPartition("t", 0): ONE})  # type: ignore[arg-type]
    assert isinstance(context.assignments, AssignmentTable)
    assert context.partitions_of("t") == [TopicPartition("t", 0)]
