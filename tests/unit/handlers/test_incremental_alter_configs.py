from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.app.runtime import Broker
from brokers.handlers import incremental_alter_configs as iac
from brokers.log.errors import InvalidConfigError
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 1, 1, {"retention.ms": "1000", "segment.ms": "60000"})
        yield b


Op = tuple[str, int, str | None]


def _resource(version: int, name: str, ops: list[Op], type_: int = TOPIC) -> Any:
    configs = tuple(
        entity(KEY, version, "AlterableConfig", name=k, config_operation=op, value=v)
        for k, op, v in ops
    )
    return entity(
        KEY,
        version,
        "AlterConfigsResource",
        resource_type=type_,
        resource_name=name,
        configs=configs,
    )


def _alter(broker: Broker, *resources: Any, version: int = 1, validate_only: bool = False) -> Any:
    request = entity(
        KEY,
        version,
        "IncrementalAlterConfigsRequest",
        resources=resources,
        validate_only=validate_only,
    )
    return call(routed(broker, iac.API_KEY), version, request).responses


@pytest.mark.parametrize("version", range(2))
def test_set_and_delete_merge_with_existing_overrides(broker: Broker, version: int) -> None:
    ops: list[Op] = [
        ("retention.ms", SET, "2000"),
        ("segment.ms", DELETE, None),
        ("flush.ms", DELETE, None),
    ]
    (result,) = _alter(broker, _resource(version, "t", ops), version=version)
    assert result.error_code == ErrorCode.none
    assert broker.metadata.topics["t"].configs == {"retention.ms": "2000"}
    assert broker.replicas.get("t", 0).log.config.retention_ms == 2000


def test_append_and_subtract_on_cleanup_policy(broker: Broker) -> None:
    (appended,) = _alter(broker, _resource(1, "t", [("cleanup.policy", APPEND, "compact")]))
    assert appended.error_code == ErrorCode.none
    # an unset list starts from its default ("delete")
    assert broker.metadata.topics["t"].configs["cleanup.policy"] == "delete,compact"
    assert broker.replicas.get("t", 0).log.config.cleanup_policy == {"delete", "compact"}
    _alter(broker, _resource(1, "t", [("cleanup.policy", APPEND, "compact")]))
    assert broker.metadata.topics["t"].configs["cleanup.policy"] == "delete,compact"
    (subtracted,) = _alter(broker, _resource(1, "t", [("cleanup.policy", SUBTRACT, "delete")]))
    assert subtracted.error_code == ErrorCode.none
    assert broker.metadata.topics["t"].configs["cleanup.policy"] == "compact"


@pytest.mark.parametrize(
    ("ops", "code", "message"),
    [
        (
            [("retention.ms", APPEND, "5")],
            ErrorCode.invalid_config,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        (
            [("segment.ms", SUBTRACT, "5")],
            ErrorCode.invalid_config,
            "Can't SUBTRACT to key segment.ms because its type is not LIST.",
        ),
        (
            [("retention.ms", SET, "-5")],
            ErrorCode.invalid_config,
            "Invalid value -5 for configuration retention.ms",
        ),
        (
            [("retention.ms", SET, None)],
            ErrorCode.invalid_request,
            "Null value not supported for : retention.ms",
        ),
        ([("retention.ms", 9, "1")], ErrorCode.invalid_request, "Unknown operations type 9"),
        (
            [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)],
            ErrorCode.invalid_request,
            "Error due to duplicate config keys",
        ),
    ],
)
def test_invalid_operations_change_nothing(
    broker: Broker, ops: list[Op], code: ErrorCode, message: str
) -> None:
    (result,) = _alter(broker, _resource(1, "t", ops))
    assert result.error_code == code
    assert (result.error_message or "").startswith(message)
    assert broker.metadata.topics["t"].configs == {"retention.ms": "1000", "segment.ms": "60000"}


def test_validate_only_and_other_resources(broker: Broker) -> None:
    results = _alter(
        broker,
        _resource(1, "t", [("retention.ms", SET, "5")]),
        _resource(1, "gone", [("retention.ms", SET, "5")]),
        _resource(1, "0", [("log.retention.ms", SET, "5")], type_=BROKER),
        validate_only=True,
    )
    assert [r.error_code for r in results] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_request,
    ]
    assert broker.metadata.topics["t"].configs["retention.ms"] == "1000"


def test_deleting_broker_configs_is_a_no_op_but_setting_one_is_refused(broker: Broker) -> None:
    """What kafka-reassign-partitions --verify sends to clear throttles (docs/compatibility.md
    D1): deleting a dynamic broker config that is never set succeeds; a SET beside it fails."""
    throttles = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
    deletes = [(name, DELETE, None) for name in throttles]
    cleared, mixed = _alter(
        broker,
        _resource(1, "0", deletes, type_=BROKER),
        _resource(1, "", [*deletes, ("log.cleaner.threads", SET, "1")], type_=BROKER),
    )
    assert cleared.error_code == ErrorCode.none, cleared.error_message
    assert mixed.error_code == ErrorCode.invalid_request
    assert "Cannot update these configs dynamically: log.cleaner.threads." in mixed.error_message


def _ops(*ops: Op) -> list[Any]:
    return [SimpleNamespace(name=n, config_operation=o, value=v) for n, o, v in ops]


items = st.lists(st.sampled_from(["compact", "delete"]), max_size=3)


@settings(max_examples=200, deadline=None)
@given(base=items, added=items, removed=items)
def test_list_operations_behave_like_ordered_sets(
    base: list[str], added: list[str], removed: list[str]
) -> None:
    current = {"cleanup.policy": ",".join(dict.fromkeys(base))} if base else {}
    start = list(dict.fromkeys(base)) if base else ["delete"]
    merged = iac.apply_operations(current, _ops(("cleanup.policy", APPEND, ",".join(added))))
    after_append = merged["cleanup.policy"].split(",") if merged["cleanup.policy"] else []
    assert after_append[: len(start)] == start and set(after_append) == set(start) | set(added)
    assert len(after_append) == len(set(after_append))
    merged = iac.apply_operations(merged, _ops(("cleanup.policy", SUBTRACT, ",".join(removed))))
    left = merged["cleanup.policy"].split(",") if merged["cleanup.policy"] else []
    assert left == [item for item in after_append if item not in removed]


def test_list_operations_refuse_unknown_names() -> None:
    with pytest.raises(InvalidConfigError):
        iac.apply_operations({}, _ops(("no.such", APPEND, "x")))
