"""`make`: one call site serves every version, but a misspelled or missing field is an error."""

from __future__ import annotations

from typing import Any

import pytest

from brokers.wire.entities import EntityFieldError, make, request_module, response_module

pytestmark = pytest.mark.unit
PRODUCE, METADATA = 0, 3


def partition_answer(version: int, **fields: object) -> Any:
    return make(response_module(PRODUCE, version), "PartitionProduceResponse", **fields)


NEWEST_FIELDS = {
    "index": 2,
    "error_code": 0,
    "base_offset": 7,
    "log_append_time": None,
    "log_start_offset": 0,
    "record_errors": (),
    "error_message": None,
}


@pytest.mark.parametrize("version", [3, 5, 8, 11])
def test_fields_a_version_lacks_are_dropped(version: int) -> None:
    built = partition_answer(version, **NEWEST_FIELDS)
    assert type(built).__version__ == version
    assert (built.index, built.base_offset) == (2, 7)


def test_a_misspelled_field_fails_instead_of_vanishing() -> None:
    fields = dict(NEWEST_FIELDS)
    fields["eror_code"] = fields.pop("error_code")
    fields["error_code"] = 0
    with pytest.raises(EntityFieldError, match="eror_code"):
        partition_answer(11, **fields)


def test_a_field_only_other_versions_have_is_not_a_misspelling() -> None:
    """v3 has no `log_start_offset` (v5+) nor `error_message` (v8+): dropped, not refused."""
    built = partition_answer(3, **NEWEST_FIELDS)
    assert not hasattr(built, "error_message")


def test_a_missing_required_field_fails() -> None:
    fields = {k: v for k, v in NEWEST_FIELDS.items() if k != "error_code"}
    with pytest.raises(EntityFieldError, match="error_code"):
        partition_answer(11, **fields)


def test_requests_are_checked_the_same_way() -> None:
    module = request_module(METADATA, 12)
    with pytest.raises(EntityFieldError, match="topicz"):
        make(module, "MetadataRequest", topicz=None, allow_auto_topic_creation=True)
