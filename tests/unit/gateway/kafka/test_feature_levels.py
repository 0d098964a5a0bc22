"""The feature levels the gateway passes on in ApiVersions (docs/gateway.md, "Feature levels"):
`transaction.version` 2 only while the gateway's table serves what a TV2 producer sends (EndTxn
v5, Produce v12, TxnOffsetCommit v5), else at most 1; features it does not know are never
passed on; ApiVersions before v3 carries none."""

from __future__ import annotations

import pytest

from brokers.wire.entities import response_module
from gateway.kafka.api_table import ApiRange, advertised, features, finalized_features

pytestmark = pytest.mark.unit
FULL = {0: (0, 13), 1: (4, 18), 18: (0, 4), 26: (0, 5), 28: (0, 5), 22: (0, 5)}


def test_transaction_version_2_only_with_what_a_tv2_producer_sends() -> None:
    table = advertised(FULL)
    assert table[0].max_version == 13 and table[26].max_version == 5
    levels = {"transaction.version": 2, "metadata.version": 27, "group.version": 1}
    assert finalized_features(levels, table) == {"transaction.version": 2}
    for key, below in ((26, 4), (0, 11), (28, 4)):
        capped = {**table, key: ApiRange(key, 0, below)}
        assert finalized_features(levels, capped) == {"transaction.version": 1}, key
    assert finalized_features({"transaction.version": 1}, table) == {"transaction.version": 1}
    assert finalized_features({"transaction.version": 0}, table) == {}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_feature_fields_from_apiversions_v3(version: int) -> None:
    module = response_module(18, version)
    fields = features(module, version, {"transaction.version": 2})
    if version < 3:
        assert fields == {}
        return
    [finalized] = fields["finalized_features"]
    assert (finalized.name, finalized.min_version_level, finalized.max_version_level) == (
        "transaction.version",
        2,
        2,
    )
    assert fields["finalized_features_epoch"] >= 0  # clients ignore levels of epoch -1
    supported = [(f.name, f.min_version, f.max_version) for f in fields["supported_features"]]
    assert supported == ([("transaction.version", 0, 2)] if version >= 4 else [])  # KAFKA-17011
